"""Turn one iteration's scheduled chunks into flat tensors and run the model.

`run` fills a `_FlatBatch` in three parts: the decodes (their attention is one padded
call), then the prefill chunks that open with the same cached blocks (attended as a
cascade, one group per prefix), then the other prefill chunks, each attended on its
own. An iteration of decodes only skips the flat batch. Index tensors are built with a
few vectorised ops per chunk, not a Python loop per token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from timely_core.engine.iteration_scheduler import Chunk
from timely_core.engine.torch.block_variants import BlockVariant
from timely_core.engine.torch.kv_cache import KvCache
from timely_core.engine.torch.lora import LoraAdapter
from timely_core.engine.torch.model.attention import AttentionBatch, PrefillSpan
from timely_core.engine.torch.model.block_batch import BlockBatch
from timely_core.engine.torch.model.decode_attention import DecodeGroup, DecodePart
from timely_core.engine.torch.model.llama import LlamaModel
from timely_core.engine.torch.model.lora_batch import LoraBatch, StackSets
from timely_core.engine.torch.model.prefill_cascade import CascadeSpan, SharedPrefill

MIN_SHARED_BLOCKS = 2  # below this, reading shared blocks per generation is as cheap
MAX_RUNS = 4  # a lone decode attends piecewise over at most this many runs, else gathers


@dataclass
class _FlatBatch:
    """One iteration's tokens in row order, and the rows whose logits are sampled
    (`sampled[i]` samples from row `logits_rows[i]`)."""

    ids: list[int] = field(default_factory=list)
    positions: list[torch.Tensor] = field(default_factory=list)
    slots: list[torch.Tensor] = field(default_factory=list)  # where each row's KV goes
    logits_rows: list[int] = field(default_factory=list)
    sampled: list[Chunk] = field(default_factory=list)
    variants: list[tuple[str | None, int]] = field(default_factory=list)  # (variant, rows)

    @property
    def rows(self) -> int:
        return len(self.ids)

    def add_chunk(self, c: Chunk, context: torch.Tensor) -> None:
        """Append a prefill chunk's rows; `context`: the slots of its first
        start + length tokens."""
        end = c.start + c.length
        self.ids.extend(c.state.token_ids[c.start : end])
        self.positions.append(torch.arange(c.start, end))
        self.slots.append(context[c.start :])
        self.variants.append((c.state.variant, c.length))
        if c.sample:
            self.logits_rows.append(self.rows - 1)
            self.sampled.append(c)


class ModelRunner:
    def __init__(
        self,
        model: LlamaModel,
        cache: KvCache,
        block_size: int,
        adapters: dict[str, LoraAdapter] | None = None,
        block_variants: dict[str, BlockVariant] | None = None,
    ) -> None:
        """`adapters`, `block_variants`: the LoRA variants and the full fine-tunes by
        name (the engine's dicts, read per run)."""
        self.model = model
        self.cache = cache
        self.block_size = block_size
        self.adapters = adapters if adapters is not None else {}
        self.block_variants = block_variants if block_variants is not None else {}
        self.lora_stacks = StackSets()  # the grouped LoRA path's stacked factors
        self._offsets = torch.arange(block_size)
        cfg = model.config
        self._query_group = cfg.num_attention_heads // cfg.num_key_value_heads
        # the cascade needs the CPU kernel that returns the log-sum-exp
        self._cascade = cache.device.device.type == "cpu"

    def _slots(self, table: list[int], length: int) -> torch.Tensor:
        blocks = torch.tensor(table, dtype=torch.long)
        return (blocks[:, None] * self.block_size + self._offsets).view(-1)[:length]

    def _decode_group(self, decodes: list[Chunk]) -> DecodeGroup:
        """The decodes' attention layout: one group, or, when generations of several
        prefixes decode together, one part per prefix that two or more share, and one
        for the rest."""
        by_first: dict[int, list[int]] = {}
        for row, c in enumerate(decodes):
            by_first.setdefault(c.state.block_table[0], []).append(row)
        sharing = [rows for rows in by_first.values() if len(rows) > 1]
        if not sharing or len(sharing[0]) == len(decodes):
            return self._decode_part(decodes)
        # the generations that share their first block with none: one part together
        alone = sorted(rows[0] for rows in by_first.values() if len(rows) == 1)
        parts = []
        for rows in sharing + ([alone] if alone else []):
            first, last = rows[0], rows[-1]
            where: slice | torch.Tensor = (
                slice(first, last + 1) if last - first + 1 == len(rows) else torch.tensor(rows)
            )
            parts.append(DecodePart(where, self._decode_part([decodes[r] for r in rows])))
        return DecodeGroup.of_parts(len(decodes), tuple(parts))

    def _decode_part(self, decodes: list[Chunk]) -> DecodeGroup:
        size = self.block_size
        lengths = [c.start + 1 for c in decodes]
        tables = [c.state.block_table for c in decodes]
        shared_blocks = _common_blocks(tables, min(lengths) // size) if len(decodes) > 1 else 0
        shared_slots, shared_start = None, None
        if shared_blocks >= MIN_SHARED_BLOCKS:
            shared_len = shared_blocks * size
            shared_slots = self._slots(tables[0], shared_len)
            shared_start = self._run_start(tables[0], shared_len)
            lengths = [n - shared_len for n in lengths]
            tables = [t[shared_blocks:] for t in tables]
        else:
            shared_blocks = 0
        max_len = max(lengths)
        if len(decodes) == 1 and shared_slots is None:
            runs = self._runs(tables[0], max_len)
            if runs is not None:  # one generation, a few runs of blocks: views, no gather
                start = runs[0][0] if len(runs) == 1 else None
                return DecodeGroup(1, max_len, None, start, None, runs=tuple(runs))
        width = -(-max_len // size)
        padded = torch.tensor([t[:width] + [0] * (width - len(t[:width])) for t in tables])
        slots = (padded[:, :, None] * size + self._offsets).view(len(decodes), -1)[:, :max_len]
        mask = None
        if min(lengths) != max_len:
            valid = torch.arange(max_len)[None, :] < torch.tensor(lengths)[:, None]
            mask = torch.zeros(valid.shape, dtype=self.model.dtype).masked_fill_(~valid, -torch.inf)
            mask = mask[:, None, :]
        return DecodeGroup(len(decodes), max_len, slots, None, mask, shared_slots, shared_start)

    def _runs(self, table: list[int], length: int) -> list[tuple[int, int]] | None:
        """The first `length` tokens as runs of back-to-back blocks, (first slot,
        tokens) each; None if more than MAX_RUNS. A prefix-cache hit or a swap-in
        usually leaves two or three runs (shared blocks, then private ones)."""
        start = self._run_start(table, length)
        if start is not None:
            return [(start, length)]
        size, blocks = self.block_size, -(-length // self.block_size)
        runs: list[tuple[int, int]] = []
        begin = 0
        for i in range(1, blocks + 1):
            if i == blocks or table[i] != table[i - 1] + 1:
                runs.append((table[begin] * size, min(i * size, length) - begin * size))
                if len(runs) > MAX_RUNS:
                    return None
                begin = i
        return runs

    def _run_start(self, table: list[int], length: int) -> int | None:
        """First slot if the first `length` tokens' blocks are consecutive blocks."""
        blocks = -(-length // self.block_size)
        first = table[0]
        if table[blocks - 1] - first != blocks - 1:
            return None
        if table[:blocks] != list(range(first, first + blocks)):  # compared in C
            return None
        return first * self.block_size

    def run(self, chunks: list[Chunk]) -> tuple[list[Chunk], torch.Tensor]:
        """Forward over `chunks`; returns the chunks that sample and their float32
        logits, row for row: the decodes, then the sampling prefill chunks in row order."""
        decodes = [c for c in chunks if _is_decode(c)]
        if len(decodes) == len(chunks):
            return decodes, self._run_decodes(decodes)
        prefills = [c for c in chunks if not _is_decode(c)]
        groups = self._shared_groups(prefills) if self._cascade else []
        grouped = {id(c) for members, _ in groups for c in members}
        plain = [c for c in prefills if id(c) not in grouped]
        flat = _FlatBatch()
        decode = self._add_decodes(flat, decodes) if decodes else None
        shared = tuple(self._add_cascade(flat, members, blocks) for members, blocks in groups)
        spans = tuple(self._add_prefill(flat, c) for c in plain)
        batch = AttentionBatch(
            slot_mapping=torch.cat(flat.slots), decode=decode, spans=spans, shared=shared
        )
        logits = self._forward(
            torch.tensor(flat.ids, dtype=torch.long),
            torch.cat(flat.positions),
            max(c.start + c.length for c in chunks) - 1,
            batch,
            torch.tensor(flat.logits_rows, dtype=torch.long),
            self._lora(flat.variants),
            self._blocks(flat.variants),
        )
        return flat.sampled, logits

    def _forward(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        max_position: int,
        batch: AttentionBatch,
        logits_index: torch.Tensor | None,
        lora: LoraBatch | None,
        blocks: BlockBatch | None,
    ) -> torch.Tensor:
        """The model forward; an iteration of base rows only calls it as without
        variants."""
        args = (ids, positions, max_position, batch, self.cache.layer_views, logits_index)
        if lora is None and blocks is None:
            return self.model.forward(*args)
        return self.model.forward(*args, lora, blocks)

    def _lora(self, variants: list[tuple[str | None, int]]) -> LoraBatch | None:
        """The iteration's LoRA rows (None when no row has a LoRA variant)."""
        if not self.adapters or all(v is None for v, _ in variants):
            return None
        adapters = self.adapters
        segments = [(adapters.get(v) if v else None, n) for v, n in variants]
        return LoraBatch.from_segments(segments, self.lora_stacks)

    def _blocks(self, variants: list[tuple[str | None, int]]) -> BlockBatch | None:
        """The iteration's rows of full fine-tunes (None when no row has one)."""
        if not self.block_variants or all(v is None for v, _ in variants):
            return None
        own = self.block_variants
        segments = [(own.get(v) if v else None, n) for v, n in variants]
        return BlockBatch.from_segments(self.model.weights, segments)

    def _add_decodes(self, flat: _FlatBatch, decodes: list[Chunk]) -> DecodeGroup:
        """Append the decodes as the batch's first rows, every one sampling."""
        inputs = self._decode_inputs(decodes)
        flat.ids.extend(inputs[0].tolist())
        flat.positions.append(inputs[1])
        flat.slots.append(inputs[2])
        flat.logits_rows.extend(range(len(decodes)))
        flat.sampled.extend(decodes)
        flat.variants.extend((c.state.variant, 1) for c in decodes)
        return self._decode_group(decodes)

    def _add_cascade(self, flat: _FlatBatch, members: list[Chunk], blocks: int) -> SharedPrefill:
        """Append chunks that open with the same `blocks` cached blocks, as contiguous
        rows attended together over those blocks."""
        first = flat.rows
        spans = []
        for c in members:
            context = self._slots(c.state.block_table, c.start + c.length)
            spans.append(self._cascade_span(flat.rows, c, context, blocks))
            flat.add_chunk(c, context)
        table, length = members[0].state.block_table, blocks * self.block_size
        shared_slots = self._slots(table, length)
        shared_start = self._run_start(table, length)
        return SharedPrefill(first, flat.rows, shared_slots, shared_start, tuple(spans))

    def _add_prefill(self, flat: _FlatBatch, c: Chunk) -> PrefillSpan:
        """Append a prefill chunk attended on its own, over its whole context."""
        end = c.start + c.length
        context = self._slots(c.state.block_table, end)
        span = _span(flat.rows, c, context, self._run_start(c.state.block_table, end))
        flat.add_chunk(c, context)
        return span

    def _shared_groups(self, prefills: list[Chunk]) -> list[tuple[list[Chunk], int]]:
        """Prefill chunks that open with the same at least MIN_SHARED_BLOCKS cached
        blocks, two or more per group (one group per robot prefix in the burst),
        with the number of blocks they share."""
        by_first: dict[int, list[Chunk]] = {}
        for c in prefills:
            if c.start // self.block_size >= MIN_SHARED_BLOCKS:
                by_first.setdefault(c.state.block_table[0], []).append(c)
        groups = []
        for members in by_first.values():
            if len(members) < 2:
                continue
            limit = min(c.start for c in members) // self.block_size
            blocks = _common_blocks([c.state.block_table for c in members], limit)
            if blocks >= MIN_SHARED_BLOCKS:
                groups.append((members, blocks))
        return groups

    def _cascade_span(
        self, offset: int, c: Chunk, context: torch.Tensor, shared_blocks: int
    ) -> CascadeSpan:
        """The chunk's attention past the shared blocks: its private context (cached
        tokens, then the chunk itself), causal, with the query heads of one KV head
        folded into rows as `prefill_cascade` lays them out."""
        end, shared = c.start + c.length, shared_blocks * self.block_size
        private_table = c.state.block_table[shared_blocks:]
        query_positions = torch.arange(c.start, end)
        visible = torch.arange(shared, end)[None, :] <= query_positions[:, None]
        mask = torch.zeros(visible.shape, dtype=self.model.dtype).masked_fill_(~visible, -torch.inf)
        return CascadeSpan(
            offset,
            c.length,
            context[shared:],
            self._run_start(private_table, end - shared),
            mask.repeat_interleave(self._query_group, dim=0),
        )

    def _decode_inputs(self, decodes: list[Chunk]) -> torch.Tensor:
        """[3 (token id, position, cache slot), decodes]: each decode's one token."""
        size = self.block_size
        return torch.tensor(
            [
                [c.state.token_ids[c.start] for c in decodes],
                [c.start for c in decodes],
                [c.state.block_table[c.start // size] * size + c.start % size for c in decodes],
            ]
        )

    def _run_decodes(self, decodes: list[Chunk]) -> torch.Tensor:
        """The usual iteration, decodes only: one small input tensor, and every row
        samples (no logits selection)."""
        inputs = self._decode_inputs(decodes)
        batch = AttentionBatch(slot_mapping=inputs[2], decode=self._decode_group(decodes), spans=())
        max_position = max(c.start for c in decodes)
        variants: list[tuple[str | None, int]] = [(c.state.variant, 1) for c in decodes]
        lora, blocks = self._lora(variants), self._blocks(variants)
        return self._forward(inputs[0], inputs[1], max_position, batch, None, lora, blocks)


def _common_blocks(tables: list[list[int]], limit: int) -> int:
    """How many leading blocks (at most `limit`) all tables share."""
    first, second = tables[0], tables[1]
    top = min(limit, len(first), len(second))
    count = 0
    while count < top and first[count] == second[count]:
        count += 1
    for table in tables[2:]:  # list comparisons run in C
        while count and table[:count] != first[:count]:
            count -= 1
    return count


def _is_decode(chunk: Chunk) -> bool:
    return chunk.length == 1 and chunk.start > 0 and chunk.sample


def _span(offset: int, chunk: Chunk, context: torch.Tensor, start: int | None) -> PrefillSpan:
    if chunk.start == 0:
        return PrefillSpan(offset, chunk.length, None, None, None)
    if chunk.length == 1:
        return PrefillSpan(offset, 1, context, start, None)
    query_positions = torch.arange(chunk.start, chunk.start + chunk.length)
    mask = torch.arange(context.shape[0])[None, :] <= query_positions[:, None]
    return PrefillSpan(offset, chunk.length, context, start, mask)
