"""One iteration's rows of block variants (full fine-tunes): per block that a variant
in the batch owns, the base runs it over the other rows and each owning variant over
its own rows (gathered, run, copied back); blocks no variant in the batch owns run
once over the whole batch, as without variants. The attention itself has no weights:
it runs once over every row, each row's K/V being what its own q/k/v block made."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from timely_core.engine.torch.block_variants import BlockVariant
    from timely_core.engine.torch.model.llama import ModelWeights

_HEAD = ("norm", "lm_head")  # run over the rows whose logits are taken


@dataclass(frozen=True)
class RowSplit:
    """Which weights run one block over which rows: the base's over the rows of no
    owning variant, each owning variant's over its own (no empty part, at least one
    part; rows None: the part is every row, run without gathering)."""

    parts: tuple[tuple[ModelWeights, torch.Tensor | None], ...]

    def map(
        self, x: torch.Tensor, fn: Callable[[ModelWeights, torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """fn(weights, x[rows]) per part, the results in the rows' places."""
        out: torch.Tensor | None = None
        for weights, rows in self.parts:
            if rows is None:
                return fn(weights, x)
            y = fn(weights, x.index_select(0, rows))
            if out is None:
                out = y.new_empty((x.shape[0], *y.shape[1:]))
            out.index_copy_(0, rows, y)
        assert out is not None  # a split has at least one part
        return out

    def row_weights(self, pick: Callable[[ModelWeights], torch.Tensor]) -> torch.Tensor:
        """A norm's weight per row, [rows, width] (its one weight vector when one part
        holds every row): the norm then runs once over all rows, each row scaled by
        its own weight, the very products it would get run part by part."""
        weights, rows = self.parts[0]
        if rows is None:
            return pick(weights)
        total = sum(r.shape[0] for _, r in self.parts if r is not None)
        out = pick(weights).new_empty((total, pick(weights).shape[0]))
        for weights, rows in self.parts:
            assert rows is not None  # only a lone part holds every row
            out.index_copy_(0, rows, pick(weights).expand(rows.shape[0], -1))
        return out

    def residual(
        self,
        hidden: torch.Tensor,
        x: torch.Tensor,
        fn: Callable[[ModelWeights, torch.Tensor, torch.Tensor], torch.Tensor],
    ) -> None:
        """hidden[rows] = fn(weights, hidden[rows], x[rows]) per part, in place."""
        for weights, rows in self.parts:
            if rows is None:
                hidden.copy_(fn(weights, hidden, x))
                return
            out = fn(weights, hidden.index_select(0, rows), x.index_select(0, rows))
            hidden.index_copy_(0, rows, out)


class BlockBatch:
    """The block variants of an iteration's rows; rows of the base model and of LoRA
    variants run every block with the base's weights. A split is computed once per
    set of owning variants (a fine-tune's blocks usually share one)."""

    def __init__(self, base: ModelWeights, variants: list[BlockVariant], owner: list[int]) -> None:
        """owner: per row, its index in `variants` (-1: a row of no block variant)."""
        self._base = base
        self._variants = variants
        self._owner = torch.tensor(owner, dtype=torch.long)
        self._owned = frozenset().union(*(v.owned for v in variants))
        self.layers = frozenset(
            int(b.split(".")[1]) for b in self._owned if b.startswith("layers.")
        )
        self._memo: dict[tuple[int, ...], RowSplit] = {}
        self._splits = {
            b: self._split(self._owning(b), self._owner, self._memo)
            for b in self._owned
            if b not in _HEAD
        }

    @classmethod
    def from_segments(
        cls, base: ModelWeights, segments: list[tuple[BlockVariant | None, int]]
    ) -> BlockBatch | None:
        """From consecutive (variant, row count) segments (None: rows of no block
        variant); None if no row has a block variant that owns a block."""
        index: dict[str, int] = {}
        variants: list[BlockVariant] = []
        owner: list[int] = []
        for variant, count in segments:
            if variant is None or not variant.owned:
                owner.extend([-1] * count)
                continue
            if variant.name not in index:
                index[variant.name] = len(variants)
                variants.append(variant)
            owner.extend([index[variant.name]] * count)
        if not variants:
            return None
        return cls(base, variants, owner)

    def split(self, block: str) -> RowSplit | None:
        """Who runs `block` (an embedding or layer block) over the batch's rows; None
        when no variant in the batch owns it (the base runs it over every row)."""
        return self._splits.get(block)

    def head(self, logits_index: torch.Tensor | None) -> tuple[RowSplit | None, RowSplit | None]:
        """The splits of the final norm and the lm_head over the selected rows
        (`logits_index`; None: every row)."""
        if logits_index is None:
            owner, memo = self._owner, self._memo
        else:
            owner, memo = self._owner.index_select(0, logits_index), {}
        norm, head = (
            self._split(self._owning(b), owner, memo) if b in self._owned else None for b in _HEAD
        )
        return norm, head

    def _owning(self, block: str) -> tuple[int, ...]:
        return tuple(i for i, v in enumerate(self._variants) if block in v.owned)

    def _split(
        self, owning: tuple[int, ...], owner: torch.Tensor, memo: dict[tuple[int, ...], RowSplit]
    ) -> RowSplit:
        found = memo.get(owning)
        if found is not None:
            return found
        base_rows = (~torch.isin(owner, torch.tensor(owning))).nonzero().squeeze(1)
        parts: list[tuple[ModelWeights, torch.Tensor | None]] = []
        if base_rows.numel():
            whole = base_rows.numel() == owner.numel()
            parts.append((self._base, None if whole else base_rows))
        for i in owning:
            rows = (owner == i).nonzero().squeeze(1)
            if rows.numel() == owner.numel():  # every row is this variant's
                parts.append((self._variants[i].weights, None))
            elif rows.numel():
                parts.append((self._variants[i].weights, rows))
        if not parts:  # no rows at all
            parts.append((self._base, None))
        memo[owning] = RowSplit(tuple(parts))
        return memo[owning]
