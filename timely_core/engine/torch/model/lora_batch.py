"""One iteration's LoRA deltas: the base projections run once over all rows, then
each adapter adds its low-rank delta to its own rows only (gathered, two small
matmuls per slot: the segmented-gather idea of Punica's SGMV, as a loop over the
adapters present, which is few per iteration)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from timely_core.engine.torch.lora import LoraAdapter


@dataclass(frozen=True)
class LoraGroup:
    adapter: LoraAdapter
    rows: slice | torch.Tensor  # a slice when its rows are contiguous


class LoraBatch:
    """The adapters of an iteration's rows; base rows carry none."""

    def __init__(self, groups: list[LoraGroup]) -> None:
        self.groups = groups

    @classmethod
    def from_segments(cls, segments: list[tuple[LoraAdapter | None, int]]) -> LoraBatch | None:
        """Groups the rows of consecutive (adapter, row count) segments by adapter
        (None: base rows); None if every row is base."""
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
        return cls(groups)

    def add(self, out: torch.Tensor, x: torch.Tensor, layer: int, slot: str) -> None:
        """out[rows] += x[rows] @ A @ B per adapter, in place (`out`: the slot's
        projection output, or the residual stream for o and down)."""
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
