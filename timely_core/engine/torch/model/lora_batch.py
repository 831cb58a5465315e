"""One iteration's LoRA deltas: the base projections run once over all rows, then
each adapter adds its low-rank delta to its own rows only (Punica's SGMV idea).

Two ways to add them, chosen per iteration:
- **grouped**: when several adapters hold similar numbers of rows (decoding
  robots of many variants), their rows are gathered into one [adapters, rows, in]
  block, padded to the largest group, and two batched matmuls against the
  adapters' stacked factors add every delta at once: a handful of kernels per
  projection whatever the number of adapters;
- **per adapter**: otherwise (one adapter, or a long prefill beside a few
  decodes, where padding would multiply the work), a loop of two small matmuls per
  adapter over its own rows.

The stacked factors of a set of adapters are built once and kept, per engine,
while that set keeps running together (`StackSets`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from timely_core.engine.torch.lora import LoraAdapter, LoraSlot

# grouped only while the padding adds at most half the adapters' rows, or a few rows
# (in small batches kernel launches, not rows, are the cost)
PAD_FRACTION = 0.5
PAD_ROWS = 16
GROUPED_MIN_ADAPTERS = 2  # fewer adapters in a batch: the loop (benches raise it to compare)
STACK_SETS = 8  # adapter sets whose stacked factors are kept


@dataclass(frozen=True)
class LoraGroup:
    adapter: LoraAdapter
    rows: slice | torch.Tensor  # a slice when its rows are contiguous


class StackCache:
    """The adapters' factors of one adapter set, stacked per (layer, slot): A as
    [adapters, in, rank], B as [adapters, rank, slot out] with each target's B at its
    ranks and output columns (zeros elsewhere, and for an adapter without the slot),
    ranks padded to the largest. Zero padding adds exact zeros."""

    def __init__(self, adapters: tuple[LoraAdapter, ...]) -> None:
        self.adapters = adapters
        self._stacks: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor] | None] = {}

    def get(
        self, layer: int, slot: str, out_features: int
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        key = (layer, slot)
        if key not in self._stacks:
            self._stacks[key] = self._build(layer, slot, out_features)
        return self._stacks[key]

    def _build(
        self, layer: int, slot: str, out_features: int
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        slots: list[LoraSlot | None] = [a.layers[layer].get(slot) for a in self.adapters]
        present = [s for s in slots if s is not None]
        if not present:
            return None
        ref = present[0].a
        rank = max(s.a.shape[1] for s in present)
        a_stack = ref.new_zeros((len(slots), ref.shape[0], rank))
        b_stack = ref.new_zeros((len(slots), rank, out_features))
        for i, factors in enumerate(slots):
            if factors is None:
                continue
            a_stack[i, :, : factors.a.shape[1]] = factors.a
            for part in factors.parts:
                b_stack[i, part.ranks, part.columns] = part.b
        return a_stack, b_stack


class StackSets:
    """The stacked factors of the adapter sets that ran together lately (an engine's
    own: one engine steps at a time), the most recent `STACK_SETS` kept."""

    def __init__(self) -> None:
        self._sets: OrderedDict[tuple[int, ...], StackCache] = OrderedDict()

    def get(self, adapters: tuple[LoraAdapter, ...]) -> StackCache:
        # keyed by identity; a kept set holds its adapters, so no id is reused meanwhile
        key = tuple(id(a) for a in adapters)
        cache = self._sets.get(key)
        if cache is None:
            cache = self._sets[key] = StackCache(adapters)
            while len(self._sets) > STACK_SETS:
                self._sets.popitem(last=False)
        else:
            self._sets.move_to_end(key)
        return cache


@dataclass(frozen=True)
class _Grouped:
    """Row layout of the grouped path: `gather` [adapters * width] picks each
    adapter's rows (pads repeat a real row), `valid` the positions that are not pads
    (None: no pads) and `rows` the output row each valid position adds to."""

    stacks: StackCache
    width: int
    gather: torch.Tensor
    valid: torch.Tensor | None
    rows: torch.Tensor


class LoraBatch:
    """The adapters of an iteration's rows; base rows carry none."""

    def __init__(self, groups: list[LoraGroup], grouped: _Grouped | None = None) -> None:
        self.groups = groups
        self._grouped = grouped

    @property
    def is_grouped(self) -> bool:
        return self._grouped is not None

    @classmethod
    def from_segments(
        cls, segments: list[tuple[LoraAdapter | None, int]], stacks: StackSets | None = None
    ) -> LoraBatch | None:
        """Groups the rows of consecutive (adapter, row count) segments by adapter
        (None: base rows); None if every row is base. `stacks`: where the grouped path
        keeps its stacked factors (None: built for this batch only)."""
        ranges: dict[str, list[tuple[int, int]]] = {}
        adapters: dict[str, LoraAdapter] = {}
        start = 0
        for adapter, count in segments:
            if adapter is not None:
                spans = ranges.setdefault(adapter.name, [])
                if spans and spans[-1][1] == start:
                    spans[-1] = (spans[-1][0], start + count)
                else:
                    spans.append((start, start + count))
                adapters[adapter.name] = adapter
            start += count
        if not ranges:
            return None
        groups = []
        for name, spans in ranges.items():
            if len(spans) == 1:
                groups.append(LoraGroup(adapters[name], slice(*spans[0])))
            else:
                rows = torch.cat([torch.arange(a, b) for a, b in spans])
                groups.append(LoraGroup(adapters[name], rows))
        return cls(groups, _grouped_layout(ranges, adapters, stacks or StackSets()))

    def add(self, out: torch.Tensor, x: torch.Tensor, layer: int, slot: str) -> None:
        """out[rows] += x[rows] @ A @ B per adapter, in place (`out`: the slot's
        projection output, or the residual stream for o and down)."""
        if self._grouped is not None:
            self._add_grouped(self._grouped, out, x, layer, slot)
            return
        for group in self.groups:
            factors = group.adapter.layers[layer].get(slot)
            if factors is None:
                continue
            rows = group.rows
            xa = x[rows] @ factors.a
            for part in factors.parts:
                delta = xa[:, part.ranks] @ part.b
                if isinstance(rows, slice):
                    out[rows, part.columns] += delta
                else:
                    out[:, part.columns].index_add_(0, rows, delta)

    @staticmethod
    def _add_grouped(
        grouped: _Grouped, out: torch.Tensor, x: torch.Tensor, layer: int, slot: str
    ) -> None:
        stacks = grouped.stacks.get(layer, slot, out.shape[1])
        if stacks is None:
            return
        a_stack, b_stack = stacks
        count = a_stack.shape[0]
        xs = x.index_select(0, grouped.gather).view(count, grouped.width, x.shape[1])
        delta = torch.bmm(torch.bmm(xs, a_stack), b_stack).view(-1, out.shape[1])
        if grouped.valid is not None:
            delta = delta.index_select(0, grouped.valid)
        out.index_add_(0, grouped.rows, delta)


def _grouped_layout(
    ranges: dict[str, list[tuple[int, int]]], adapters: dict[str, LoraAdapter], sets: StackSets
) -> _Grouped | None:
    """The grouped path's layout, or None where the per-adapter loop does less work:
    a single adapter, or rows so uneven that padding would add many rows."""
    if len(ranges) < GROUPED_MIN_ADAPTERS:
        return None
    rows_of = {name: [r for a, b in spans for r in range(a, b)] for name, spans in ranges.items()}
    width = max(len(rows) for rows in rows_of.values())
    total = sum(len(rows) for rows in rows_of.values())
    padding = width * len(rows_of) - total
    if padding > max(PAD_FRACTION * total, PAD_ROWS):
        return None
    gather: list[int] = []
    valid: list[int] = []
    for rows in rows_of.values():
        valid.extend(range(len(gather), len(gather) + len(rows)))
        gather.extend(rows + [rows[0]] * (width - len(rows)))
    target = [r for rows in rows_of.values() for r in rows]
    return _Grouped(
        stacks=sets.get(tuple(adapters[name] for name in rows_of)),
        width=width,
        gather=torch.tensor(gather),
        valid=None if len(valid) == len(gather) else torch.tensor(valid),
        rows=torch.tensor(target),
    )
