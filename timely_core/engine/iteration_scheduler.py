"""What one iteration computes: token budget, decode-first order, and preemption
when a decode needs a block and none is free.

The policy layer decides *which* generations run (the `gen_ids` of a step, in its
priority order); this only fits them into one forward: decodes first (one token
each), then prefill chunks, until `max_batched_tokens` is spent. A decode that
crosses into a new block and finds none free preempts, most recently admitted
first, runnable generations not in this step, then the last-listed ones of this
step, with `EngineConfig.preemption_strategy` (swap; discard when the host pool is
full). Suspended generations and pinned prefixes are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable

from timely_core.engine.block_manager import BlockManager
from timely_core.engine.config import EngineConfig
from timely_core.engine.generation import GenerationState, KvLocation
from timely_core.engine.model_runner import Chunk
from timely_core.engine.protocol import HandlingStrategy, OutOfKvMemory


class IterationScheduler:
    def __init__(self, config: EngineConfig, blocks: BlockManager) -> None:
        self.config = config
        self.blocks = blocks

    def schedule(
        self, states: list[GenerationState], live: Iterable[GenerationState]
    ) -> list[Chunk]:
        """Chunks for this iteration over `states` (caller order); `live` are all
        generations the engine holds (preemption candidates)."""
        budget = self.config.max_batched_tokens
        decoding = [s.kv is KvLocation.DEVICE and s.num_pending == 1 for s in states]
        order = [s for s, d in zip(states, decoding, strict=True) if d]
        order += [s for s, d in zip(states, decoding, strict=True) if not d]
        chunks: list[Chunk] = []
        for position, state in enumerate(order):
            if budget == 0:
                break
            if state.kv is not KvLocation.DEVICE and not self.try_restore(state):
                continue
            length = min(state.num_pending, budget)
            end = state.num_computed + length
            if not self._make_room(state, end, order[position + 1 :], chunks, live):
                continue
            self.blocks.grow(state, end)
            chunks.append(Chunk(state, state.num_computed, length))
            budget -= length
        return chunks

    def restore(self, state: GenerationState) -> None:
        """Bring a generation's KV back to device (swap-in, or re-admission for a
        re-prefill of prompt + generated ids). Raises OutOfKvMemory, changing nothing."""
        if state.kv is KvLocation.HOST:
            self.blocks.swap_in(state)
        elif state.kv is KvLocation.NONE:
            prefix = self.blocks.prefixes.get(state.prefix_id or "")
            if prefix is not None and state.token_ids[: len(prefix.token_ids)] != prefix.token_ids:
                prefix = None
            self.blocks.admit(state, prefix)

    def try_restore(self, state: GenerationState) -> bool:
        try:
            self.restore(state)
        except OutOfKvMemory:
            return False
        return True

    def _make_room(
        self,
        state: GenerationState,
        end: int,
        later: list[GenerationState],
        chunks: list[Chunk],
        live: Iterable[GenerationState],
    ) -> bool:
        """Preempt until `state` can hold `end` tokens; False if it still cannot.
        Generations already scheduled in this iteration (`chunks`) are never victims."""
        if self.blocks.blocks_to_grow(state, end) <= self.blocks.num_free_device:
            return True
        later = [s for s in later if s.kv is KvLocation.DEVICE]
        in_step = {s.gen_id for s in later} | {c.state.gen_id for c in chunks}
        outside = sorted(
            (
                s
                for s in live
                if not s.suspended
                and s.kv is KvLocation.DEVICE
                and s is not state
                and s.gen_id not in in_step
            ),
            key=lambda s: -s.admitted_seq,
        )
        victims = outside + later[::-1]
        while self.blocks.blocks_to_grow(state, end) > self.blocks.num_free_device:
            if not victims:
                return False
            self._preempt(victims.pop(0))
        return True

    def _preempt(self, state: GenerationState) -> None:
        if state.kv is not KvLocation.DEVICE:
            return
        strategy = HandlingStrategy(self.config.preemption_strategy)
        if strategy is HandlingStrategy.SWAP and self.blocks.swap_out(state):
            state.strategy = HandlingStrategy.SWAP
            return
        self.blocks.free(state)
        state.strategy = HandlingStrategy.DISCARD
