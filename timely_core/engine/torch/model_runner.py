"""Turn one iteration's scheduled chunks into flat tensors and run the model.

Decodes come first (their attention is one padded call), prefill chunks follow:
first those that open with the same cached blocks (attended as a cascade), then the
rest. All index tensors are built with a handful of vectorised ops per iteration, not a
Python loop per token.
"""

from __future__ import annotations

import torch

from timely_core.engine.iteration_scheduler import Chunk
from timely_core.engine.torch.kv_cache import KvCache
from timely_core.engine.torch.model.attention import AttentionBatch, PrefillSpan
from timely_core.engine.torch.model.decode_attention import DecodeGroup
from timely_core.engine.torch.model.llama import LlamaModel
from timely_core.engine.torch.model.prefill_cascade import CascadeSpan, SharedPrefill

MIN_SHARED_BLOCKS = 2  # below this, reading shared blocks per generation is as cheap
MAX_RUNS = 4  # a lone decode attends piecewise over at most this many runs, else gathers


class ModelRunner:
    def __init__(self, model: LlamaModel, cache: KvCache, block_size: int) -> None:
        self.model = model
        self.cache = cache
        self.block_size = block_size
        self._offsets = torch.arange(block_size)
        cfg = model.config
        self._query_group = cfg.num_attention_heads // cfg.num_key_value_heads
        # the cascade needs the CPU kernel that returns the log-sum-exp
        self._cascade = cache.device.device.type == "cpu"

    def _slots(self, table: list[int], length: int) -> torch.Tensor:
        blocks = torch.tensor(table, dtype=torch.long)
        return (blocks[:, None] * self.block_size + self._offsets).view(-1)[:length]

    def _decode_group(self, decodes: list[Chunk]) -> DecodeGroup:
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
        logits, row for row (one-token chunks after cached context go first: they
        share one padded attention call)."""
        decodes = [c for c in chunks if _is_decode(c)]
        if len(decodes) == len(chunks):
            return decodes, self._run_decodes(decodes)
        ids: list[int] = []
        positions: list[torch.Tensor] = []
        slot_parts: list[torch.Tensor] = []
        logits_rows: list[int] = []
        spans: list[PrefillSpan] = []
        prefills = [c for c in chunks if not _is_decode(c)]
        group = self._decode_group(decodes) if decodes else None
        if group is not None:
            ids.extend(c.state.token_ids[c.start] for c in decodes)
            positions.append(torch.tensor([c.start for c in decodes], dtype=torch.long))
            slot_parts.append(
                torch.tensor(
                    [
                        c.state.block_table[c.start // self.block_size] * self.block_size
                        + c.start % self.block_size
                        for c in decodes
                    ]
                )
            )
            logits_rows.extend(range(group.size))
        groups = self._shared_groups(prefills) if self._cascade else []
        grouped = {id(c) for members, _ in groups for c in members}
        prefills = [c for members, _ in groups for c in members] + [
            c for c in prefills if id(c) not in grouped
        ]
        shared: list[SharedPrefill] = []
        offset = len(ids)
        for members, blocks in groups:
            first = offset
            cascade_spans = []
            for c in members:
                context = self._slots(c.state.block_table, c.start + c.length)
                cascade_spans.append(self._cascade_span(offset, c, context, blocks))
                offset = self._add_tokens(
                    c, offset, context, ids, positions, slot_parts, logits_rows
                )
            table = members[0].state.block_table
            length = blocks * self.block_size
            shared.append(
                SharedPrefill(
                    first,
                    offset,
                    self._slots(table, length),
                    self._run_start(table, length),
                    tuple(cascade_spans),
                )
            )
        for c in prefills[len(grouped) :]:
            end = c.start + c.length
            context = self._slots(c.state.block_table, end)
            spans.append(_span(offset, c, context, self._run_start(c.state.block_table, end)))
            offset = self._add_tokens(c, offset, context, ids, positions, slot_parts, logits_rows)
        batch = AttentionBatch(
            slot_mapping=torch.cat(slot_parts),
            decode=group,
            spans=tuple(spans),
            shared=tuple(shared),
        )
        max_position = max(c.start + c.length for c in chunks) - 1
        logits = self.model.forward(
            torch.tensor(ids, dtype=torch.long),
            torch.cat(positions),
            max_position,
            batch,
            self.cache.layer_views,
            torch.tensor(logits_rows, dtype=torch.long),
        )
        return decodes + [c for c in prefills if c.sample], logits

    def _add_tokens(
        self,
        c: Chunk,
        offset: int,
        context: torch.Tensor,
        ids: list[int],
        positions: list[torch.Tensor],
        slot_parts: list[torch.Tensor],
        logits_rows: list[int],
    ) -> int:
        """Append a prefill chunk's tokens, positions and slots (`context`: the slots
        of its first start + length tokens); returns the next row."""
        end = c.start + c.length
        ids.extend(c.state.token_ids[c.start : end])
        positions.append(torch.arange(c.start, end))
        slot_parts.append(context[c.start :])
        if c.sample:
            logits_rows.append(offset + c.length - 1)
        return offset + c.length

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

    def _run_decodes(self, decodes: list[Chunk]) -> torch.Tensor:
        """The usual iteration, decodes only: token ids, positions and cache slots in
        one small tensor, and every row samples (no logits selection)."""
        size = self.block_size
        positions = [c.start for c in decodes]
        inputs = torch.tensor(
            [
                [c.state.token_ids[c.start] for c in decodes],
                positions,
                [c.state.block_table[c.start // size] * size + c.start % size for c in decodes],
            ]
        )
        batch = AttentionBatch(slot_mapping=inputs[2], decode=self._decode_group(decodes), spans=())
        return self.model.forward(
            inputs[0], inputs[1], max(positions), batch, self.cache.layer_views, None
        )


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
