"""Each suspended generation's KV kept, swapped or dropped (LAMPS), decided by the
service: the engine is only ever told preserve, swap or discard.

At a suspension the configured strategy (the policy's own, for LAMPS and its
baselines, else `ServiceConfig.handling_strategy`) is resolved: a fixed one as is;
`auto` to the least waste of the three equations (scheduling/kv_strategy.py) for
the predicted wait (wait_prediction.py), this generation's own KV and the running
batch's; `ttl` to preserve for Continuum's time-to-live, or to the cheaper
eviction when no pinning pays. Every `refresh_iterations` (LAMPS: 10) a preserved
generation still waiting past its predicted resume (or its TTL) is decided again
on the wait that remains and may be swapped out or discarded then.

KV that left the device comes back before its resume only by a prefetch
(`ServiceConfig.kv_prefetch`, engines with `KvPrefetching`): at each iteration,
when device memory is free beyond what the running generations' next decodes, the
queued generations that may be admitted now and a 1/32 margin need, and no
admission fell short of memory lately, the suspended swapped-out generation with
the soonest predicted resume, if that is within `PREFETCH_HORIZON_S` (KV brought
back long before it is needed is likelier given up again), has its KV swapped
back in (one per iteration, once
per wait: a prefetch given up again is not retried, so pressure that comes and goes
does not make the KV shuttle). The engine keeps its host copy until the resume,
and gives a prefetched KV up first under any pressure, without a copy; so a
prefetch never costs a runnable or an arriving generation its memory.

A generation suspended while its validating tools answer (tool_waits.py) is
predicted to wait what its tools are predicted to take still (per-tool running
statistics of measured answers, tools/answer_times.py), and is decided like any
other: `auto` by the three equations, re-decided every `refresh_iterations`.
Those suspensions (and re-decisions) are also counted as "tool-<strategy>"
("tool-rehandled-<strategy>").

A generation that may run on at once (timely generates ahead; with nothing else
queued it is resumed at the next iteration) is predicted to wait nothing. This
also keeps LAMPS's ranking inputs: the memory-over-time score of a queued
generation and, under policies that wait for calls, when its call returned
(`ready_s`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from timely_core.engine.block_manager import blocks_for
from timely_core.engine.protocol import HandlingStrategy, KvPrefetching, KvRehandling
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.scheduling.kv_strategy import (
    FIXED,
    PRESERVE,
    SWAP,
    kv_costs_for,
    memory_time,
    ttl_s,
    waste,
)
from timely_core.scheduling.policies.base import CallPolicy
from timely_core.serving.generation import Generation
from timely_core.serving.wait_prediction import WaitPredictor

if TYPE_CHECKING:
    from timely_core.serving.state import ServiceState

REFRESH_ITERATIONS = 10  # LAMPS re-decides and re-scores every 10 iterations
_ALPHA = 0.2  # weight of the newest sample in running means
DEFAULT_SEGMENT_TOKENS = 16.0  # a segment's length until a robot type has one
DEFAULT_TOKEN_S = 0.02  # one iteration, until the service has timed one
# "nearly full" for `auto`: chosen on bench/lamps.py's memory-bound fleet among 0,
# 1/32 and 1/8 (docs/service-api.md, handling strategies)
LOW_FREE_FRACTION = 1 / 32
# prefetch only a resume predicted within this long: chosen on bench/lamps_real.py's
# simulated API mix among unbounded, 5, 1 and 0.2 s (bench/results/NOTES.md, LAMPS)
PREFETCH_HORIZON_S = 5.0


@dataclass
class _Suspension:
    generation: Generation
    applied: HandlingStrategy  # what the engine was told
    check_s: float  # predicted resume (auto) or end of the TTL: look again after it
    iteration: int  # the service's iteration count at the suspension
    resume_s: float  # predicted resume


@dataclass
class _TypeStats:
    """Per robot type: running means of a segment's tokens and of the wait after it."""

    segment_tokens: float = DEFAULT_SEGMENT_TOKENS
    wait_s: float = 0.0
    samples: int = 0
    version: int = 0


class KvHandling:
    def __init__(self, state: ServiceState, refresh_iterations: int = REFRESH_ITERATIONS) -> None:
        if refresh_iterations < 1:
            raise ValueError(f"refresh_iterations must be >= 1, got {refresh_iterations}")
        self._state = state
        self.refresh_iterations = refresh_iterations
        memory = state.engine.memory()
        self.costs = kv_costs_for(
            state.engine, PAPER_LLAMA3_8B_RTX4090, memory.bytes_per_block / memory.block_size
        )
        # what the engine can do: no host pool (vLLM) means no swap; an engine that
        # names the strategies it accepts (vLLM's suspend_strategies) gets only those
        accepted = getattr(state.engine, "suspend_strategies", None)
        self.allowed = tuple(
            s
            for s in FIXED
            if (s is not SWAP or memory.host_blocks_total > 0)
            and (accepted is None or s in accepted)
        )
        policy = state.policy
        self.strategy = HandlingStrategy(state.config.handling_strategy)
        self.waits_for_calls = False
        if isinstance(policy, CallPolicy):
            self.strategy = HandlingStrategy(policy.handling_strategy)
            self.waits_for_calls = policy.waits_for_calls
        if self.strategy is SWAP and memory.host_blocks_total == 0:
            raise ValueError(
                f"handling_strategy swap: the {type(state.engine).__name__} has no host KV "
                "pool to swap to; use auto, preserve or discard"
            )
        if self.strategy in FIXED and self.strategy not in self.allowed:
            raise ValueError(
                f"handling_strategy {self.strategy.value}: the {type(state.engine).__name__} "
                f"does not accept it (it accepts {', '.join(s.value for s in self.allowed)}); "
                "use auto or one of those"
            )
        if self.strategy is HandlingStrategy.TTL and not self._releasing:
            raise ValueError(
                f"handling_strategy ttl: the {type(state.engine).__name__} accepts only "
                "preserve, so a time-to-live could never let a waiting generation's KV go"
            )
        self.predictor = WaitPredictor()
        self.queue_delay_s = 0.0  # running mean of arrival -> first token
        self.counts: Counter[str] = Counter()  # strategies applied; "rehandled-<s>"
        # perturbs each predicted wait (the misprediction bench); None: as predicted
        self.wait_noise: Callable[[float], float] | None = None
        self._waiting: dict[int, _Suspension] = {}
        self._types: dict[str, _TypeStats] = {}
        self._scored: dict[int, int] = {}  # gen id -> its type's version when scored
        self._iterations = 0
        self._stalls_seen = 0  # the service's kv_stalls counter at the last look
        self._stalled_at = -(10**9)  # iteration of the last admission short of memory
        # LAMPS and its baselines weigh idle memory as waste always, as published;
        # otherwise only while memory is short (`_short_of_memory`)
        self.memory_aware = not self.waits_for_calls
        self.prefetching = (
            state.config.kv_prefetch
            and SWAP in self.allowed
            and isinstance(state.engine, KvPrefetching)
        )
        # suspended gen id -> (predicted resume, strategy applied): prefetch order
        self._suspended: dict[int, tuple[float, HandlingStrategy]] = {}
        self._prefetched: set[int] = set()  # prefetched in their current suspension
        self.prefetch_horizon_s = PREFETCH_HORIZON_S

    @property
    def _releasing(self) -> tuple[HandlingStrategy, ...]:
        """The strategies that free the device KV, among those the engine can do."""
        return tuple(s for s in self.allowed if s is not PRESERVE)

    # ---- suspension ------------------------------------------------------
    def suspend(self, generation: Generation, now_s: float) -> HandlingStrategy:
        """Suspend `generation` in the engine with its resolved strategy (returned)."""
        state = self._state
        if generation.first_token_s is not None and len(generation.records) == 1:
            self.queue_delay_s += _ALPHA * (
                generation.first_token_s - generation.arrival_s - self.queue_delay_s
            )
        wait_s = self.predicted_wait_s(generation, now_s)
        self._learn_type(generation, wait_s)
        strategy, check_s = self.strategy, now_s + wait_s
        if not strategy.is_fixed:
            own, other = self._contexts(generation)
            losses = waste(self.costs, own, other, wait_s)
            if strategy is HandlingStrategy.AUTO and not self._short_of_memory():
                strategy, check_s = PRESERVE, now_s  # idle memory nobody needs: no waste
            elif strategy is HandlingStrategy.AUTO:
                strategy = losses.least(self.allowed)
            else:  # ttl
                cv = self.predictor.wait_cv(generation)
                tau = ttl_s(self.costs, own, other, wait_s, cv, self.queue_delay_s)
                strategy = PRESERVE if tau > 0 else losses.least(self._releasing)
                check_s = now_s + tau
        state.engine.suspend(generation.gen_id, strategy)
        self.counts[strategy.value] += 1
        if state.tools.answer_wait_s(generation.task_id) is not None:
            self.counts[f"tool-{strategy.value}"] += 1
        self._suspended[generation.gen_id] = (now_s + wait_s, strategy)
        self._prefetched.discard(generation.gen_id)
        # a previous suspension's entry would re-decide (and evict) this one's KV
        self._waiting.pop(generation.gen_id, None)
        if strategy is PRESERVE and not self.strategy.is_fixed:
            self._waiting[generation.gen_id] = _Suspension(
                generation, strategy, check_s, self._iterations, now_s + wait_s
            )
        return strategy

    def _short_of_memory(self) -> bool:
        """Whether kept KV keeps anyone out: an admission stopped short of memory in
        the last two refresh periods, or device KV is nearly full (the next decodes
        would preempt)."""
        if not self.memory_aware:
            return True
        if self._iterations - self._stalled_at <= 2 * self.refresh_iterations:
            return True
        memory = self._state.engine.memory()
        return memory.device_blocks_free < LOW_FREE_FRACTION * memory.device_blocks_total

    def predicted_wait_s(self, generation: Generation, now_s: float) -> float:
        """How long `generation`, being suspended now, will wait to be resumed."""
        state = self._state
        tool_wait_s = state.tools.answer_wait_s(generation.task_id)
        if tool_wait_s is not None:  # its verdicts are out: it waits for its tools
            wait_s = tool_wait_s
        elif self.waits_for_calls:
            wait_s = self.predictor.wait_s(generation, now_s, 0.0)
        else:
            # with no one else queued it is back at the next iteration
            table = state.scheduler.table
            queued_itself = generation.gen_id in table and not table.is_running(generation.gen_id)
            contended = len(state.scheduler) - int(queued_itself) > 0
            lead_s = state.config.segment_generation_s
            wait_s = self.predictor.wait_s(generation, now_s, lead_s) if contended else 0.0
        if self.wait_noise is not None:
            wait_s = max(self.wait_noise(wait_s), 0.0)
        return wait_s

    def _contexts(self, generation: Generation) -> tuple[int, int]:
        """(C_i, C_other): the generation's own KV tokens (its pinned prefix is kept
        either way) and the running batch's."""
        state = self._state
        own = len(state.engine.token_ids(generation.gen_id)) - self._pinned_len(generation)
        # the others by the service's own count: some may have just ended in the engine
        other = sum(_tokens(g) for g in state.running.values() if g is not generation)
        return max(own, 0), other

    def _pinned_len(self, generation: Generation) -> int:
        robot = self._state.robots.get(generation.robot_id)
        if robot is None or robot.prefix.prefix_id is None:
            return 0
        return len(robot.prefix.shared_ids)

    # ---- every iteration -------------------------------------------------
    def refresh(self, now_s: float) -> None:
        """Every `refresh_iterations` calls: re-decide preserved generations waiting
        past their check time, and re-score queued ones whose inputs changed."""
        self._iterations += 1
        stalls = self._state.counters["kv_stalls"]
        if stalls != self._stalls_seen:
            self._stalls_seen, self._stalled_at = stalls, self._iterations
        if self.prefetching:
            self._prefetch(now_s)
        if self._iterations % self.refresh_iterations:
            return
        engine = self._state.engine
        ttl = self.strategy is HandlingStrategy.TTL
        if not ttl and not self._short_of_memory():
            self._rescore()
            return  # kept memory wastes nothing while nobody is short of it
        for gen_id, waiting in list(self._waiting.items()):
            generation = waiting.generation
            if not generation.suspended or gen_id not in self._state.by_gen_id:
                del self._waiting[gen_id]
                continue
            if now_s < waiting.check_s or (
                self._iterations - waiting.iteration < self.refresh_iterations
            ):
                continue  # not yet past its prediction, or not waited N iterations
            overrun_s = now_s - waiting.resume_s  # past its prediction: as long again
            remaining_s = max(self.predicted_wait_s(generation, now_s), overrun_s)
            own, other = self._contexts(generation)
            losses = waste(self.costs, own, other, remaining_s)
            choice = losses.least(self._releasing if ttl else self.allowed)
            if choice is PRESERVE:
                waiting.check_s = now_s + remaining_s
                continue
            del self._waiting[gen_id]
            if isinstance(engine, KvRehandling) and engine.rehandle(gen_id, choice):
                self.counts[f"rehandled-{choice.value}"] += 1
                if self._state.tools.answer_wait_s(generation.task_id) is not None:
                    self.counts[f"tool-rehandled-{choice.value}"] += 1
                self._suspended[gen_id] = (waiting.resume_s, choice)
        self._rescore()

    def engine_ranking(self, ranking: list[int]) -> list[int]:
        """The ranking the engine preempts by: the policy's, except that preserved
        generations of one urgency class (the same TUF) trade places so that the one
        with the longest wait left, the most waste kept, goes first. A class keeps
        its places: an urgent generation is never given up for a normal one."""
        if len(self._waiting) < 2:
            return ranking
        places: dict[tuple[float, float], list[int]] = {}
        for position, gen_id in enumerate(ranking):
            if gen_id in self._waiting:
                tuf = self._waiting[gen_id].generation.request.tuf
                places.setdefault((tuf.initial_utility, tuf.slope), []).append(position)
        reordered = list(ranking)
        for positions in places.values():
            members = sorted(
                (ranking[p] for p in positions), key=lambda g: self._waiting[g].check_s
            )  # the soonest resumed most urgent: the longest wait preempted first
            for position, gen_id in zip(positions, members, strict=True):
                reordered[position] = gen_id
        return reordered

    # ---- prefetch ----------------------------------------------------------
    def _prefetch(self, now_s: float) -> None:
        """Swap in the KV of the swapped-out generation resumed soonest, if free
        device memory covers it beyond what others need next (module docstring)."""
        if self._iterations - self._stalled_at <= 2 * self.refresh_iterations:
            return  # an admission fell short of memory lately: memory is not free
        state = self._state
        engine = state.engine
        assert isinstance(engine, KvPrefetching)
        swapped: dict[int, tuple[float, int]] = {}  # gen id -> (predicted resume, cost)
        for gen_id, (resume_s, _) in list(self._suspended.items()):
            generation = state.by_gen_id.get(gen_id)
            if generation is None:
                del self._suspended[gen_id]
                self._prefetched.discard(gen_id)
            elif generation.suspended and generation.in_engine:
                cost = engine.prefetch_cost(gen_id)
                if cost is not None:
                    swapped[gen_id] = (resume_s, cost)
        horizon_s = self.prefetch_horizon_s
        candidates = [
            g for g in swapped if g not in self._prefetched and swapped[g][0] - now_s <= horizon_s
        ]
        if not candidates:
            return
        gen_id = min(candidates, key=lambda g: (swapped[g][0], g))
        memory = engine.memory()
        margin = math.ceil(LOW_FREE_FRACTION * memory.device_blocks_total)
        need = self._next_need(now_s, memory.block_size, gen_id, swapped)
        if memory.device_blocks_free - swapped[gen_id][1] < need + margin:
            return
        if engine.prefetch(gen_id):
            self.counts["prefetch"] += 1
            self._prefetched.add(gen_id)  # once a wait: given up, it swaps in at resume

    def _next_need(
        self, now_s: float, block_size: int, chosen: int, swapped: Mapping[int, tuple[float, int]]
    ) -> int:
        """Device blocks the next admissions and decodes may take, at most: one per
        running generation (a decode crossing into a block), and what each queued one
        that may be admitted now needs as its KV stands (`chosen`'s is the prefetch)."""
        state = self._state
        table = state.scheduler.table
        need = len(state.running)
        for gen_id in table.gen_ids():
            generation = state.by_gen_id.get(gen_id)
            if generation is None or gen_id == chosen or table.is_running(gen_id):
                continue
            if self.ready_s(generation) > now_s:
                continue  # its call has not returned: not admitted now
            applied = self._suspended.get(gen_id)
            if gen_id in swapped:
                need += swapped[gen_id][1]  # its swap-in (a prefetch given up included)
            elif gen_id in self._prefetched or (
                generation.in_engine and applied is not None and applied[1] is PRESERVE
            ):
                need += 1  # its KV is there; its next decode may cross a block
            elif generation.in_engine:
                need += blocks_for(_tokens(generation), block_size)  # to recompute
            else:
                prompt = len(generation.engine_prompt_ids()) - self._pinned_len(generation)
                need += blocks_for(max(prompt, 1), block_size) + 1
        return need

    def prefetch_counts(self) -> dict[str, int]:
        """The engine's prefetch totals (`KvPrefetching.prefetch_counts`); zeros
        without prefetching."""
        engine = self._state.engine
        if not isinstance(engine, KvPrefetching):
            return {"prefetches": 0, "prefetch_hits": 0, "prefetch_given_up": 0}
        return engine.prefetch_counts()

    # ---- LAMPS's ranking inputs ------------------------------------------
    def ready_s(self, generation: Generation) -> float:
        """When a queued generation may be admitted: at once, or under a policy that
        waits for calls, once its last segment's end is reported."""
        if not self.waits_for_calls or not generation.records:
            return 0.0
        finished = generation.records[-1].finished_at_s
        return math.inf if finished is None else finished

    def memory_time(self, generation: Generation) -> float:
        """LAMPS's score of a queued generation: memory over time of its next
        segment and the wait after it, under the strategy that wait would get."""
        state = self._state
        stats = self._types.get(generation.language.robot_type, _TypeStats())
        self._scored[generation.gen_id] = stats.version
        generated = sum(len(r.segment.token_ids) for r in generation.records)
        own = max(len(generation.prompt_ids) - self._pinned_len(generation), 0) + generated
        token_s = state.scheduler.batch.iteration_s(max(len(state.running), 1))
        wait_s = stats.wait_s
        strategy = self.strategy
        if not strategy.is_fixed:
            strategy = waste(self.costs, own, 0, wait_s).least(self.allowed)
        return memory_time(
            self.costs,
            own,
            max(round(stats.segment_tokens), 1),
            token_s or DEFAULT_TOKEN_S,
            wait_s,
            strategy,
        )

    def on_segment_done(self, generation: Generation, index: int, first_report: bool) -> None:
        """`segment_done`: refine the predictions; a call's end lets its generation in."""
        if first_report:
            self.predictor.observe(generation, index)
        scheduler = self._state.scheduler
        if generation.gen_id in scheduler and index == len(generation.records) - 1:
            scheduler.table.set_ready(generation.gen_id, self.ready_s(generation))

    def forget(self, generation: Generation) -> None:
        self._waiting.pop(generation.gen_id, None)
        self._suspended.pop(generation.gen_id, None)
        self._prefetched.discard(generation.gen_id)
        self._scored.pop(generation.gen_id, None)
        self.predictor.forget(generation)

    def _learn_type(self, generation: Generation, wait_s: float) -> None:
        stats = self._types.setdefault(generation.language.robot_type, _TypeStats())
        tokens = float(len(generation.records[-1].segment.token_ids)) if generation.records else 0
        if stats.samples == 0:
            stats.segment_tokens, stats.wait_s = tokens or DEFAULT_SEGMENT_TOKENS, wait_s
        else:
            stats.segment_tokens += _ALPHA * (tokens - stats.segment_tokens)
            stats.wait_s += _ALPHA * (wait_s - stats.wait_s)
        stats.samples += 1
        stats.version += 1

    def _rescore(self) -> None:
        """Selective refresh: re-score only queued generations whose robot type has
        learned something since they were scored."""
        state = self._state
        table = state.scheduler.table
        for gen_id, version in list(self._scored.items()):
            generation = state.by_gen_id.get(gen_id)
            if generation is None or gen_id not in table:
                del self._scored[gen_id]
                continue
            stats = self._types.get(generation.language.robot_type)
            if stats is not None and stats.version != version and not table.is_running(gen_id):
                table.set_memory_time(gen_id, self.memory_time(generation))


def _tokens(generation: Generation) -> int:
    """Prompt and generated tokens of a generation, as the service counts them."""
    generated = sum(len(r.segment.token_ids) for r in generation.records)
    return len(generation.prompt_ids) + generated + generation.segment_tokens
