"""What one iteration computes: token budget, decode-first order, and preemption
when a decode needs a block and none is free. Shared by the torch engine and the
simulator, so both preempt the same victims.

The policy layer decides *which* generations run (the `gen_ids` of a step, most
urgent first) and ranks every live generation (`set_ranking`); this only fits them
into one forward: decodes first (one token each), then prefill chunks, until
`max_batched_tokens` is spent. A decode that crosses into a new block, or a
preempted generation coming back, and finds too few free preempts less urgent
generations (by the ranking) first: those outside this step, least urgent first,
then this step's own after it; never one already scheduled in it. A more urgent
generation outside the step gives up its kept KV only when nothing is scheduled in
the iteration yet (a preserved cache is not worth a stalled batch: with every block
held by waiting generations no step could run). Victims are swapped, or discarded
when `preemption_strategy` says so or the host pool is full. A suspended generation
whose KV was prefetched (brought back from the host ahead of its resume) is given
up before anyone else, by anyone: its host copy is still valid, so that costs no
copy. Generations the ranking does not name
go first, most recently admitted first (runnable before suspended). Pinned prefixes
are never touched.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from timely_core.engine.block_manager import BlockManager, PinnedPrefix
from timely_core.engine.protocol import HandlingStrategy, OutOfKvMemory
from timely_core.engine.sequence import KvLocation, Sequence

_UNRANKED = 2**62  # the rank of a generation the ranking does not name: the least urgent


@dataclass(frozen=True)
class Chunk:
    """Compute KV for tokens [start, start + length) of `state`; sample after it if
    `sample` (the chunk reaches the end of the known tokens)."""

    state: Sequence
    start: int
    length: int

    @property
    def sample(self) -> bool:
        return self.start + self.length == len(self.state.token_ids)


class IterationScheduler:
    def __init__(
        self,
        blocks: BlockManager,
        max_batched_tokens: int,
        preemption_strategy: HandlingStrategy = HandlingStrategy.SWAP,
    ) -> None:
        if preemption_strategy not in (HandlingStrategy.SWAP, HandlingStrategy.DISCARD):
            raise ValueError(
                f"preemption_strategy must be swap or discard, not {preemption_strategy.value}"
            )
        self.blocks = blocks
        self.max_batched_tokens = max_batched_tokens
        self.preemption_strategy = preemption_strategy
        self.preemptions = 0
        self._rank: dict[int, int] = {}

    def set_ranking(self, gen_ids: list[int]) -> None:
        """The policy's ranking of live generations, most urgent first."""
        self._rank = {gen_id: position for position, gen_id in enumerate(gen_ids)}

    def _urgency(self, state: Sequence) -> int:
        """Its place in the ranking: lower is more urgent; unranked ones last."""
        return self._rank.get(state.gen_id, _UNRANKED)

    def _expendability(self, state: Sequence) -> int:
        """Sort key of victims, most expendable first: unnamed, then least urgent."""
        return -self._urgency(state)

    def schedule(self, states: list[Sequence], live: Iterable[Sequence]) -> list[Chunk]:
        """Chunks for this iteration over `states` (in ranking order, then as
        listed); `live` are all generations the engine holds (preemption candidates)."""
        budget = self.max_batched_tokens
        order = self._order(states)
        chunks: list[Chunk] = []
        for position, state in enumerate(order):
            if budget == 0:
                break
            later = order[position + 1 :]
            if state.kv is not KvLocation.DEVICE and not (
                self._make_room(state, self.restore_cost(state), later, chunks, live)
                and self.try_restore(state)
            ):
                continue
            length = min(state.num_pending, budget)
            end = state.num_computed + length
            if not self._make_room(
                state, self.blocks.blocks_to_grow(state, end), later, chunks, live
            ):
                continue
            self.blocks.grow(state, end)
            chunks.append(Chunk(state, state.num_computed, length))
            budget -= length
        return chunks

    def _order(self, states: list[Sequence]) -> list[Sequence]:
        """Decodes first, then the rest, each in ranking order (stable: unranked
        ones last, as listed)."""
        states = sorted(states, key=self._urgency)
        decoding = [s.kv is KvLocation.DEVICE and s.num_pending == 1 for s in states]
        order = [s for s, d in zip(states, decoding, strict=True) if d]
        return order + [s for s, d in zip(states, decoding, strict=True) if not d]

    def unfittable(self, states: list[Sequence], live: Iterable[Sequence]) -> Sequence:
        """Of a step none of whose generations `schedule` could fit: the one to give
        up. The first, in scheduling order, that needs more device blocks than are
        free with every other live generation preempted (no later step could run it
        either); if none does on its own (they block each other), the first."""
        live = list(live)
        order = self._order(states)
        for state in order:
            if state.kv is KvLocation.DEVICE:
                end = state.num_computed + min(state.num_pending, self.max_batched_tokens)
                need = self.blocks.blocks_to_grow(state, end)
            else:
                need = self.restore_cost(state)
            others = [s for s in live if s is not state and s.kv is KvLocation.DEVICE]
            if need > self.blocks.num_free_device + self._frees(others):
                return state
        return order[0]

    def resume(self, state: Sequence, live: Iterable[Sequence]) -> None:
        """Restore a suspended generation, preempting other suspended ones if it must
        (`reclaim`). Raises OutOfKvMemory, having preempted nobody, if even that is
        not enough."""
        if state.kv is not KvLocation.DEVICE:
            self.reclaim(state, self.restore_cost(state), live)
        self.restore(state)

    def reclaim(self, state: Sequence, need: int, live: Iterable[Sequence]) -> bool:
        """Free `need` device blocks for `state` (being added or resumed) by
        preempting suspended generations less urgent than it, never a runnable one:
        the running batch stays as it is, and no urgent generation's KV goes to admit
        a less urgent one. False, preempting nobody, if that cannot free enough."""
        return self._make_room(state, need, [], [], live, runnable=False)

    def reclaimable(self, live: Iterable[Sequence], state: Sequence | None = None) -> int:
        """Device blocks `reclaim` could free (for `state`: from those less urgent)."""
        floor = -1 if state is None else self._urgency(state)
        return self._frees(
            [
                s
                for s in live
                if s.suspended
                and s.kv is KvLocation.DEVICE
                and (s.prefetched or self._urgency(s) >= floor)
            ]
        )

    def restore(self, state: Sequence) -> None:
        """Bring a generation's KV back to device (swap-in, or re-admission for a
        re-prefill of prompt + generated ids). Raises OutOfKvMemory, changing nothing."""
        if state.kv is KvLocation.HOST:
            self.blocks.swap_in(state)
        elif state.kv is KvLocation.NONE:  # its own blocks may still be cached
            self.blocks.admit(state, self._restore_prefix(state), past_prefix=True)

    def restore_cost(self, state: Sequence) -> int:
        """Free device blocks `restore` needs at most."""
        if state.kv is KvLocation.HOST:
            return len(state.host_blocks)
        prefix = self._restore_prefix(state)
        return self.blocks.plan(
            state.token_ids, prefix, past_prefix=True, variant=state.variant
        ).cost

    def _restore_prefix(self, state: Sequence) -> PinnedPrefix | None:
        """The pinned prefix a re-admission of `state` shares, if it still starts with
        it (and holds its variant's KV)."""
        prefix = self.blocks.prefixes.get(state.prefix_id or "")
        if prefix is not None and state.token_ids[: len(prefix.token_ids)] != prefix.token_ids:
            return None
        if prefix is not None and prefix.variant != state.variant:
            return None
        return prefix

    def try_restore(self, state: Sequence) -> bool:
        try:
            self.restore(state)
        except OutOfKvMemory:
            return False
        return True

    def _make_room(
        self,
        state: Sequence,
        need: int,
        later: list[Sequence],
        chunks: list[Chunk],
        live: Iterable[Sequence],
        runnable: bool = True,
    ) -> bool:
        """Preempt until `need` device blocks are free; False, preempting nobody, if
        they cannot be. Generations already scheduled in this iteration (`chunks`)
        are never victims; runnable ones only if `runnable`."""
        if need <= self.blocks.num_free_device:
            return True
        in_step = {s.gen_id for s in later} | {c.state.gen_id for c in chunks}
        # of this step's own, only those after it and less urgent than it
        later = [
            s
            for s in later
            if s.kv is KvLocation.DEVICE and self._urgency(s) >= self._urgency(state)
        ]
        outside = sorted(
            (
                s
                for s in live
                if s.kv is KvLocation.DEVICE
                and s is not state
                and s.gen_id not in in_step
                and (
                    runnable
                    or (s.suspended and (s.prefetched or self._urgency(s) >= self._urgency(state)))
                )
            ),
            # prefetched KV first (its host copy is valid: giving it up costs no
            # copy), then least urgent; among unranked: runnable before suspended,
            # latest first
            key=lambda s: (
                not s.prefetched,
                self._expendability(s),
                s.suspended,
                -s.admitted_seq,
            ),
        )
        # less urgent ones (outside, then this step's) before any more urgent one, and
        # a more urgent generation's kept KV only so that the iteration runs at all
        mine = self._urgency(state)
        victims = [s for s in outside if self._urgency(s) >= mine or s.prefetched]
        if runnable:
            victims += sorted(reversed(later), key=self._expendability)
        if not chunks:
            victims += [s for s in outside if self._urgency(s) < mine and not s.prefetched]
        shortfall = need - self.blocks.num_free_device
        if self._frees(victims) < shortfall:
            return False
        # a swap keeps blocks its victim shares (with another victim, say): when the
        # victims' own blocks are not enough, they are discarded, which frees those
        exclusive = sum(1 for s in victims for b in s.block_table if self.blocks.ref_counts[b] == 1)
        discard = exclusive < shortfall
        while need > self.blocks.num_free_device:
            self.preempt(victims.pop(0), discard=discard)
        return True

    def _frees(self, victims: list[Sequence]) -> int:
        """Device blocks preempting all of `victims` would return to the pool: those
        no one else holds (a prefix's blocks stay with the prefix)."""
        holders = Counter(b for s in victims for b in s.block_table)
        return sum(1 for b, n in holders.items() if self.blocks.ref_counts[b] == n)

    def preempt(self, state: Sequence, discard: bool = False) -> None:
        """Take `state`'s KV off the device by `preemption_strategy` (or discard it)."""
        if state.kv is not KvLocation.DEVICE:
            return
        if state.prefetched and not discard:
            self.blocks.give_up_prefetch(state)  # not a preemption: it was not needed yet
            return
        self.preemptions += 1
        swap = self.preemption_strategy is HandlingStrategy.SWAP and not discard
        if swap and self.blocks.swap_out(state):
            state.strategy = HandlingStrategy.SWAP
            return
        self.discard(state)

    def discard(self, state: Sequence) -> None:
        """Drop `state`'s KV. Its blocks are free at once; the hashed ones stay
        findable until reallocated, so a re-admission reuses whatever is still
        cached and recomputes the rest (`discarded_computed` tells how much)."""
        state.discarded_computed = max(state.discarded_computed, state.num_computed)
        self.blocks.free(state)
        state.strategy = HandlingStrategy.DISCARD
