"""`PagedEngine`: the `Engine` lifecycle over a paged KV pool, shared by the torch
engine and the simulator so both keep exactly the same books: admission with
prefix sharing and the content-hash cache, suspension by strategy, preemption,
memory reports. A subclass says only how an iteration's chunks are computed and
which token each sampling chunk yields (a model forward, or a latency model and
a script).

Memory policy (never a crash): `add`, `resume` and `register_prefix` reserve
device blocks for every known token up front, `add` and `resume` preempting
suspended generations if they must, and raise `OutOfKvMemory` (changing nothing)
when even that is not enough; `suspend(SWAP)` falls back to discard when the host
pool is full; inside `step`, a decode short of a block preempts
(iteration_scheduler.py). A preempted generation stays runnable: the next step
that lists it swaps it back in or re-prefills it once memory allows; until then it
produces no token. A generation that does not fit even with every other one
preempted (it outgrew the device) is ended alone: `step` raises `GenerationsFailed`
naming it, with the others' tokens (no later step could run it either).

Prefetch (`KvPrefetching`): a suspended generation's swapped-out KV copied back
into free device blocks before its resume, the host copy kept until the resume, so
that any pressure gives the device blocks up first and copies nothing (the
iteration scheduler's victims, `rehandle`, `suspend` never see a difference).

Discard, precisely: the generation's blocks count as free at once; those holding
full, computed blocks stay findable by content until reallocated, so a resume
reuses whatever is still cached and recomputes the rest (`recomputed_tokens`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from timely_core.engine.block_manager import BlockCopier, BlockManager, PinnedPrefix
from timely_core.engine.iteration_scheduler import Chunk, IterationScheduler
from timely_core.engine.observed import Span, check_observed, rewritten_spans
from timely_core.engine.protocol import (
    EngineError,
    GenerationsFailed,
    HandlingStrategy,
    MemoryReport,
    OutOfKvMemory,
    SamplingParams,
    StepOutput,
    UnknownGeneration,
    UnknownVariant,
)
from timely_core.engine.sequence import KvLocation, Sequence


class PagedEngine:
    def __init__(
        self,
        *,
        block_size: int,
        num_device_blocks: int,
        num_host_blocks: int,
        bytes_per_block: int,
        copier: BlockCopier,
        max_batched_tokens: int,
        max_generations: int,
        preemption_strategy: HandlingStrategy,
        prefix_caching: bool,
        eos_ids: tuple[int, ...],
    ) -> None:
        self.block_size = block_size
        self.bytes_per_block = bytes_per_block
        self.max_generations = max_generations
        # tokens a generation may hold, prompt included (the model's context); None:
        # no limit. A generation that reaches it finishes, as at `max_tokens`.
        self.max_model_len: int | None = None
        self.blocks = BlockManager(
            block_size, num_device_blocks, num_host_blocks, copier, prefix_caching
        )
        self.scheduler = IterationScheduler(
            self.blocks, max_batched_tokens, HandlingStrategy(preemption_strategy)
        )
        self._eos = eos_ids
        self._gens: dict[int, Sequence] = {}
        # `_forward` may leave each sampled token's log-probability here, by gen_id
        self._logprobs: dict[int, float] = {}
        self._admissions = itertools.count()
        self.recomputed_tokens = 0  # KV computed again after a discard
        self.suspensions = 0
        self.resumptions = 0
        self.rewrites = 0

    # ---- subclass hooks --------------------------------------------------
    def _forward(self, chunks: list[Chunk]) -> list[tuple[Chunk, int]]:
        """Compute the KV of `chunks` (possibly none); the sampled token of each
        chunk that reaches the end of its known tokens, in chunk order."""
        raise NotImplementedError

    def _compute_prefix(self, state: Sequence) -> None:
        """Compute the KV of a prefix being registered, from `state.num_computed` on."""
        raise NotImplementedError

    def _prepare(self, state: Sequence) -> None:
        """A generation is about to be admitted; may refuse it (nothing is held yet)."""

    def _forget(self, gen_id: int) -> None:
        """A generation ended (finished, aborted) or its admission failed."""

    def _rewritten(
        self, state: Sequence, token_ids: list[int], appended: int, observed: list[Span]
    ) -> None:
        """`state` is about to hold `token_ids` (its last `appended` ids appended) and
        the `observed` spans (observed.py): adjust per-generation state (a grammar
        matcher, a script), or refuse with EngineError before anything changed."""

    def _check_variant(self, variant: str | None, what: str) -> None:
        """Refuse a variant the engine does not serve (this one serves only the base)."""
        if variant is not None:
            raise UnknownVariant(
                f"{what}: unknown variant {variant!r}; this engine serves the base only"
            )

    def _check_tokens(self, token_ids: list[int], what: str) -> None:
        if not token_ids:
            raise ValueError(f"{what} is empty")

    def _generator(self, params: SamplingParams) -> Any:
        """Validate `params`; the generation's private random stream, if it has one."""
        return None

    @contextmanager
    def _copies(self) -> Iterator[None]:
        """Around block bookkeeping that may copy KV (swaps, copy-on-write)."""
        yield

    # ---- protocol: identity and memory -----------------------------------
    @property
    def eos_token_id(self) -> int:
        """The model's (first) EOS id; -1 if none is known."""
        return self._eos[0] if self._eos else -1

    def memory(self) -> MemoryReport:
        return MemoryReport(
            block_size=self.block_size,
            bytes_per_block=self.bytes_per_block,
            device_blocks_total=self.blocks.num_device_blocks,
            device_blocks_free=self.blocks.num_free_device,
            host_blocks_total=self.blocks.num_host_blocks,
            host_blocks_free=self.blocks.num_free_host,
            pinned_prefix_blocks=self.blocks.num_pinned_blocks,
        )

    def token_ids(self, gen_id: int) -> list[int]:
        return list(self._state(gen_id).token_ids)

    def generation(self, gen_id: int) -> Sequence:
        """The engine's state of a live generation (read it, do not change it)."""
        return self._state(gen_id)

    def set_ranking(self, gen_ids: list[int]) -> None:
        self.scheduler.set_ranking(gen_ids)

    # ---- protocol: prefixes ----------------------------------------------
    def register_prefix(
        self, prefix_id: str, token_ids: list[int], variant: str | None = None
    ) -> None:
        """Raises OutOfKvMemory if the prefix does not fit; a previous registration
        of the same id then stays as it was. `variant`: whose KV it holds (a LoRA
        changes it); only generations of that variant may use it."""
        self._check_tokens(token_ids, f"prefix {prefix_id!r}")
        self._check_variant(variant, f"prefix {prefix_id!r}")
        state = Sequence(-1, list(token_ids), len(token_ids), SamplingParams(), -1)
        state.variant = variant
        with self._copies():
            try:
                self.blocks.admit(state, None, compute_all=True)
            except OutOfKvMemory as exc:  # its message names the internal generation -1
                raise OutOfKvMemory(
                    f"prefix {prefix_id!r} ({len(token_ids)} tokens) does not fit in device "
                    f"KV memory: {self.blocks.num_free_device} of "
                    f"{self.blocks.num_device_blocks} blocks free"
                ) from exc
        self._compute_prefix(state)
        state.num_computed = len(token_ids)
        self.blocks.register_full_blocks(state)
        if prefix_id in self.blocks.prefixes:
            self.blocks.unpin(prefix_id)
        self.blocks.pin(prefix_id, state)

    def unregister_prefix(self, prefix_id: str) -> None:
        self._prefix(prefix_id)
        self.blocks.unpin(prefix_id)

    # ---- protocol: admission ---------------------------------------------
    def can_admit(self, num_tokens: int, prefix_id: str | None = None) -> bool:
        prefix = self._prefix(prefix_id) if prefix_id is not None else None
        cost = self.blocks.admission_cost(num_tokens, prefix)
        free = self.blocks.num_free_device
        return cost <= free or cost <= free + self.scheduler.reclaimable(self._gens.values())

    def add(
        self,
        gen_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prefix_id: str | None = None,
        variant: str | None = None,
    ) -> None:
        """`variant`: the LoRA adapter it runs with (None: the base model)."""
        if gen_id in self._gens:
            raise EngineError(f"generation {gen_id} is already live")
        self._check_tokens(prompt_token_ids, f"prompt of generation {gen_id}")
        if self.max_model_len is not None and len(prompt_token_ids) >= self.max_model_len:
            raise ValueError(
                f"prompt of generation {gen_id} has {len(prompt_token_ids)} tokens; the "
                f"model's context is {self.max_model_len} positions"
            )
        self._check_variant(variant, f"generation {gen_id}")
        generator = self._generator(params)
        prefix = None
        if prefix_id is not None:
            prefix = self._prefix(prefix_id)
            if prompt_token_ids[: len(prefix.token_ids)] != prefix.token_ids:
                raise ValueError(
                    f"prompt of generation {gen_id} does not start with prefix {prefix_id!r}"
                )
            if prefix.variant != variant:
                raise ValueError(
                    f"generation {gen_id} runs variant {variant or 'base'!r} but prefix "
                    f"{prefix_id!r} holds the KV of variant {prefix.variant or 'base'!r}"
                )
        state = Sequence(
            gen_id=gen_id,
            token_ids=list(prompt_token_ids),
            prompt_len=len(prompt_token_ids),
            params=params,
            admitted_seq=next(self._admissions),
            prefix_id=prefix_id,
            variant=variant,
            generator=generator,
        )
        self._prepare(state)
        try:
            with self._copies():
                cost = self.blocks.plan(state.token_ids, prefix, variant=variant).cost
                self.scheduler.reclaim(state, cost, self._gens.values())
                self.blocks.admit(state, prefix)
        except BaseException:
            self._forget(gen_id)
            raise
        self._gens[gen_id] = state

    # ---- protocol: lifecycle ---------------------------------------------
    def suspend(self, gen_id: int, strategy: HandlingStrategy) -> None:
        """Swap falls back to discard (recorded in `generation(id).strategy`) when the
        host pool cannot hold the generation's blocks."""
        state = self._state(gen_id)
        if state.suspended:
            raise EngineError(f"generation {gen_id} is already suspended")
        strategy = _fixed(strategy)
        state.suspended, state.strategy = True, strategy
        self.suspensions += 1
        self._release(state, strategy)

    def rehandle(self, gen_id: int, strategy: HandlingStrategy) -> bool:
        """`KvRehandling`: a preserved (suspended) generation swapped out or discarded
        now; False when its KV has left the device already (preempted)."""
        state = self._state(gen_id)
        strategy = _fixed(strategy)
        if not state.suspended:
            raise EngineError(f"generation {gen_id} is not suspended")
        if strategy is HandlingStrategy.PRESERVE:
            raise EngineError("rehandle swaps out or discards; preserve is not a change")
        if state.kv is not KvLocation.DEVICE:
            return False
        state.strategy = strategy
        self._release(state, strategy)
        return True

    def _release(self, state: Sequence, strategy: HandlingStrategy) -> None:
        """Take a suspended generation's KV off the device as `strategy` says."""
        if strategy is HandlingStrategy.SWAP and state.kv is KvLocation.DEVICE:
            with self._copies():
                swapped = self.blocks.swap_out(state)
            if not swapped:
                self.scheduler.discard(state)
        elif strategy is HandlingStrategy.DISCARD:
            self.scheduler.discard(state)

    def prefetch_cost(self, gen_id: int) -> int | None:
        """`KvPrefetching`: device blocks a prefetch would take (None: not on host)."""
        state = self._state(gen_id)
        if not state.suspended or state.kv is not KvLocation.HOST:
            return None
        return len(state.host_blocks)

    def prefetch(self, gen_id: int) -> bool:
        """`KvPrefetching`: swap a suspended generation's KV in before its resume,
        into free blocks only; the host copy is kept until it resumes."""
        state = self._state(gen_id)
        if not state.suspended:
            raise EngineError(f"generation {gen_id} is not suspended; nothing to prefetch")
        if state.kv is not KvLocation.HOST:
            return False
        with self._copies():
            return self.blocks.prefetch(state)

    def prefetch_counts(self) -> dict[str, int]:
        blocks = self.blocks
        return {
            "prefetches": blocks.prefetches,
            "prefetch_hits": blocks.prefetch_hits,
            "prefetch_given_up": blocks.prefetch_given_up,
        }

    def resume(self, gen_id: int) -> None:
        state = self._state(gen_id)
        if not state.suspended:
            raise EngineError(f"generation {gen_id} is not suspended")
        if state.prefetched:
            self.blocks.settle_prefetch(state)  # on the device already: nothing to copy
        try:
            with self._copies():
                self.scheduler.resume(state, self._gens.values())
        except OutOfKvMemory as exc:
            raise OutOfKvMemory(
                f"generation {gen_id} does not fit in device KV memory to resume ({exc})"
            ) from None
        state.suspended = False
        self.resumptions += 1

    def rewrite(
        self,
        gen_id: int,
        keep_generated: int,
        append_ids: list[int],
        observed: tuple[int, int] | None = None,
    ) -> None:
        """`RewritableEngine.rewrite`. The KV goes as by a discard: the blocks are
        free at once and the resume finds the kept full blocks in the content cache,
        so it recomputes only the last, partial kept block and the appended ids
        (all of it if the blocks were reallocated meanwhile)."""
        state = self._state(gen_id)
        if not state.suspended:
            raise EngineError(f"generation {gen_id} must be suspended to be rewritten")
        if not 0 <= keep_generated <= state.num_generated:
            raise ValueError(
                f"generation {gen_id}: keep_generated={keep_generated} is outside "
                f"[0, {state.num_generated}]"
            )
        if append_ids:
            self._check_tokens(list(append_ids), f"ids appended to generation {gen_id}")
        check_observed(observed, len(append_ids), f"generation {gen_id}")
        spans = rewritten_spans(state.observed, keep_generated, observed)
        kept = state.prompt_len + keep_generated
        token_ids = state.token_ids[:kept] + list(append_ids)
        if self.max_model_len is not None and len(token_ids) >= self.max_model_len:
            raise EngineError(
                f"generation {gen_id} would hold {len(token_ids)} tokens after the rewrite; "
                f"the model's context is {self.max_model_len} positions"
            )
        self._rewritten(state, token_ids, len(append_ids), spans)
        if state.kv is not KvLocation.NONE:
            with self._copies():
                self.scheduler.discard(state)
        state.token_ids = token_ids
        state.observed = spans
        state.discarded_computed = min(state.discarded_computed, kept)
        self.rewrites += 1

    def abort(self, gen_id: int) -> None:
        self.blocks.free(self._state(gen_id))
        del self._gens[gen_id]
        self._forget(gen_id)

    # ---- protocol: one iteration -----------------------------------------
    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        if len(set(gen_ids)) != len(gen_ids):
            raise EngineError(f"step lists a generation twice: {gen_ids}")
        if len(gen_ids) > self.max_generations:
            raise EngineError(
                f"step lists {len(gen_ids)} generations; this engine runs at most "
                f"max_generations={self.max_generations} per iteration"
            )
        states = [self._runnable(g) for g in gen_ids]
        failures: dict[int, str] = {}
        with self._copies():  # preemption swaps and swap-ins are block copies
            chunks = self.scheduler.schedule(states, self._gens.values())
            while states and not chunks:
                # one does not fit even with every other one preempted: no later step
                # could run it either, so it fails alone rather than idle forever
                # (or end the others' plans with it)
                stuck = self.scheduler.unfittable(states, self._gens.values())
                failures[stuck.gen_id] = self._unfittable_reason(stuck)
                self.abort(stuck.gen_id)
                states.remove(stuck)
                chunks = self.scheduler.schedule(states, self._gens.values())
        sampled = self._forward(chunks) if chunks else []
        for chunk in chunks:
            state, end = chunk.state, chunk.start + chunk.length
            self.recomputed_tokens += max(0, min(end, state.discarded_computed) - chunk.start)
            state.num_computed = end
            self.blocks.register_full_blocks(state)
        outputs = {c.state.gen_id: self._append(c.state, token) for c, token in sampled}
        produced = [outputs[g] for g in gen_ids if g in outputs]
        if failures:
            raise GenerationsFailed(failures, produced)
        return produced

    def _unfittable_reason(self, state: Sequence) -> str:
        blocks = self.blocks
        return (
            f"generation {state.gen_id} does not fit in device KV memory even with every "
            f"other generation preempted: {len(state.token_ids)} tokens against "
            f"{blocks.num_device_blocks} blocks of {blocks.block_size} tokens, "
            f"{blocks.num_pinned_blocks} of them held by pinned prompt prefixes"
        )

    # ---- internals -------------------------------------------------------
    def _append(self, state: Sequence, token: int) -> StepOutput:
        state.token_ids.append(token)
        finished = (
            token in self._eos
            or token in state.params.stop_token_ids
            or state.num_generated >= state.params.max_tokens
            or (self.max_model_len is not None and len(state.token_ids) >= self.max_model_len)
        )
        if finished:
            self.blocks.free(state)
            del self._gens[state.gen_id]
            self._forget(state.gen_id)
        logprob = self._logprobs.pop(state.gen_id, None)
        return StepOutput(state.gen_id, token, finished, logprob)

    def _state(self, gen_id: int) -> Sequence:
        state = self._gens.get(gen_id)
        if state is None:
            raise UnknownGeneration(f"no live generation {gen_id}")
        return state

    def _runnable(self, gen_id: int) -> Sequence:
        state = self._state(gen_id)
        if state.suspended:
            raise EngineError(f"generation {gen_id} is suspended; resume it before stepping")
        return state

    def _prefix(self, prefix_id: str | None) -> PinnedPrefix:
        prefix = self.blocks.prefixes.get(prefix_id or "")
        if prefix is None:
            raise EngineError(f"no registered prefix {prefix_id!r}")
        return prefix


def _fixed(strategy: HandlingStrategy) -> HandlingStrategy:
    """`strategy` as an engine applies it; `auto` and `ttl` are the service's to resolve."""
    strategy = HandlingStrategy(strategy)
    if not strategy.is_fixed:
        raise EngineError(
            f"handling strategy {strategy.value!r} is resolved by the service; "
            "an engine takes preserve, swap or discard"
        )
    return strategy
