"""One scheduling point and one engine iteration (call holding the state's
`engine_gate`, and not its `lock`).

Arrivals whose time has come join the queue; the scheduler ranks every live
generation (the policy; Eq. 4 for `timely`), the engine is told the ranking (whom to
preempt first), and the scheduler admits greedily under the batch cap, the latency
guide and KV memory; the engine runs one `step` over the batch, most urgent first,
and each output goes to `SegmentDispatch`. An engine failure ends the running tasks, not the
service; generations the engine failed on their own (`GenerationsFailed`) end those
tasks only, each with its reason, and the others' tokens of that step go on as
usual; an error in one task's handling ends that task only.

The state's lock is released while the engine computes: a robot's `submit` or
`segment_done` then waits for at most the short bookkeeping before or after a step,
never for the step. Held through the step, the lock would make each submission of a
burst wait for one or more iterations, which can exceed the engine's own time to the
first segment (measured: docs/design-notes.md, "Lock released during the engine
step"). Whatever else calls the engine (`cancel`, `register_robot`, `stats`) takes
`engine_gate` first, so the running batch cannot change during a step.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import time

from timely_core.engine.protocol import (
    GenerationsFailed,
    OutOfKvMemory,
    SamplingParams,
    StepOutput,
)
from timely_core.scheduling.batch_control import RunningBudget
from timely_core.scheduling.policies.base import SlotOrder
from timely_core.serving.generation import GenerationState
from timely_core.serving.plan_closing import update_closing
from timely_core.serving.segment_dispatch import SegmentDispatch
from timely_core.serving.state import ServiceState
from timely_core.serving.tool_waits import ToolWaits
from timely_core.serving.variants import add_generation

log = logging.getLogger(__name__)


class ServiceIteration:
    def __init__(self, state: ServiceState) -> None:
        self._state = state
        self._dispatch = SegmentDispatch(state)
        # this pass's admission: generations refused for KV memory (can_admit, or
        # OutOfKvMemory), and whether the engine refused one for another reason
        self._short_of_memory: set[int] = set()
        self._refused = False

    @property
    def tool_waits(self) -> ToolWaits:
        """Generations suspended for their tools' verdicts."""
        return self._dispatch.tool_waits

    def run_guarded(self) -> bool:
        """`run`, with an engine failure ending the running tasks. True if work was done."""
        try:
            return self.run()
        except Exception as exc:
            log.exception("engine iteration failed")
            with self._state.lock:
                failed = list(self._state.running.values())
                for generation in failed:
                    self._state.fail(generation, f"engine failure: {exc}")
            return bool(failed)

    def run(self) -> bool:
        """One scheduling point and one engine iteration. False if nothing ran."""
        state = self._state
        with state.lock:
            state.work_signalled = False
            now = state.clock.now()
            self._release_arrivals(now)
            self._dispatch.resume_answered(now)  # verdicts in: held segments go out
            state.kv_handling.refresh(now)  # waits longer than predicted: decided again
            started = time.perf_counter()
            order = state.scheduler.rank(now)
            ranking = state.scheduler.ranked_ids(order)
            state.decision_time_s += time.perf_counter() - started
            # before admission: add/resume may preempt (by waste within a TUF class)
            state.engine.set_ranking(state.kv_handling.engine_ranking(ranking))
            self._short_of_memory, self._refused = set(), False
            self._admit(now, order)
            if not state.running:
                self._fail_unfittable(ranking)
                return False
            started = state.clock.now()
            waits = self.tool_waits  # running ones waiting for a tool take no token
            batch = [g for g in ranking if g in state.running and g not in waits]
            if not batch:  # most urgent first; none: every running one waits
                return False
        failures: dict[int, str] = {}
        try:
            outputs = state.engine.step(batch)  # without the lock: see the module docstring
        except GenerationsFailed as exc:  # those generations only: the others' tokens count
            outputs, failures = exc.outputs, exc.failures
        with state.lock:
            self._on_outputs(batch, outputs, started)
            self._fail_generations(failures)
        return True

    def _on_outputs(self, batch: list[int], outputs: list[StepOutput], started: float) -> None:
        state = self._state
        finished_at = state.clock.now()
        duration = finished_at - started
        state.counters["iterations"] += 1
        state.engine_busy_s += duration
        state.scheduler.batch.record_iteration(duration, len(batch))
        for output in outputs:
            generation = state.running.get(output.gen_id)
            if generation is None:
                continue
            try:
                self._dispatch.on_token(generation, output, finished_at)
            except Exception as exc:  # e.g. a language's execution-time model: this task only
                log.exception("task %s failed", generation.task_id)
                if generation.state is not GenerationState.FINISHED:
                    state.fail(generation, f"internal error: {exc!r}")

    def _fail_generations(self, failures: dict[int, str]) -> None:
        """End the tasks of the generations the engine failed (and has already ended:
        no abort is sent for them), each with its own reason."""
        state = self._state
        for gen_id, reason in failures.items():
            generation = state.by_gen_id.get(gen_id)
            if generation is None:
                continue  # its task ended meanwhile
            log.warning("task %s failed in the engine: %s", generation.task_id, reason)
            generation.in_engine = False
            state.fail(generation, f"engine failure: {reason}")

    def _release_arrivals(self, now: float) -> None:
        state = self._state
        while state.pending and state.pending[0][0] <= now:
            _, _, task_id = heapq.heappop(state.pending)
            generation = state.generations[task_id]
            if generation.state is not GenerationState.PENDING:
                continue  # cancelled before it arrived
            if state.waiting_first() >= state.config.max_queue:
                state.counters["rejected"] += 1
                state.end(
                    generation,
                    error=f"queue full at arrival (max_queue={state.config.max_queue})",
                )
                continue
            state.enqueue(generation)

    def _admit(self, now: float, order: SlotOrder) -> None:
        state = self._state
        if not len(state.scheduler):
            return
        running = [
            RunningBudget(g.segment_deadline_s(), g.segment_tokens)
            if state.policy.latency_guided_batch
            else RunningBudget(0.0, 0)  # only counted against the batch cap
            for g in state.running.values()
        ]
        started = time.perf_counter()
        chosen = state.scheduler.decide(now, running, self._fits, order)
        state.decision_time_s += time.perf_counter() - started
        state.counters["decisions"] += 1
        for gen_id in chosen:
            generation = state.by_gen_id[gen_id]
            try:
                if not generation.in_engine:
                    prefix_id = state.engine_prefix(generation)
                    params = state.sampling_params(generation)
                    if generation.written_ids and params.candidates:
                        # candidates choose how a plan starts; re-admitted after a
                        # rollback, it goes on as decoded
                        params = dataclasses.replace(params, candidates=0)
                    prompt = generation.engine_prompt_ids()
                    params = within_context(params, len(prompt), state.engine)
                    variant = generation.variant
                    add_generation(state.engine, gen_id, prompt, params, prefix_id, variant)
                    generation.engine_base = len(generation.written_ids)
                    generation.in_engine = True
                    generation.closing = False  # as the engine's new generation
                    update_closing(state.engine, generation, params)
                    if prefix_id is not None and state.scenes.prefixes.get(prefix_id):
                        state.counters["scene_hits"] += 1
                elif generation.suspended:
                    state.engine.resume(gen_id)
                    generation.suspended = False
            except OutOfKvMemory:
                state.counters["kv_stalls"] += 1
                self._short_of_memory.add(gen_id)
                return  # stays queued; memory frees as running generations end
            except Exception as exc:  # this generation only: the engine refused it
                log.exception("engine refused generation %d", gen_id)
                self._refused = True
                state.fail(generation, f"engine refused the generation: {exc}")
                continue
            state.scheduler.start(gen_id)
            generation.state = GenerationState.RUNNING
            state.running[gen_id] = generation

    def _fits(self, gen_id: int) -> bool:
        generation = self._state.by_gen_id[gen_id]
        if not generation.in_engine:
            fits = self._state.engine.can_admit(
                len(generation.engine_prompt_ids()), self._state.engine_prefix(generation)
            )
            self._state.counters["kv_stalls"] += not fits  # the decision ends here
            if not fits:
                self._short_of_memory.add(gen_id)
            return fits
        return True  # suspended: resume() reports OutOfKvMemory itself

    def _fail_unfittable(self, ranking: list[int]) -> None:
        """Nothing runs, yet the best queued generation does not fit: it never will.
        Only where memory refused it in this pass: a generation merely not reached
        (the engine refused others, for their own reasons) is tried next pass."""
        state = self._state
        best = next((g for g in ranking if g in state.by_gen_id), None)  # not failed
        if best is None or state.by_gen_id[best].in_engine:
            return
        if self._refused or best not in self._short_of_memory:
            return
        generation = state.by_gen_id[best]
        memory = state.engine.memory()
        if memory.device_blocks_free < memory.device_blocks_total - memory.pinned_prefix_blocks:
            return  # someone still holds memory (a suspended generation); wait for it
        scene = state.scenes.least_recent()
        if scene is not None:  # prefilled scenes give way to tasks; retried next pass
            state.scenes.forget(scene)
            return
        state.fail(
            generation,
            f"prompt of {len(generation.prompt_ids)} tokens does not fit in KV memory: "
            f"{memory.device_blocks_total} blocks of {memory.block_size} tokens, "
            f"{memory.pinned_prefix_blocks} of them held by pinned prompt prefixes",
        )


def within_context(params: SamplingParams, prompt_len: int, engine: object) -> SamplingParams:
    """`params` with `max_tokens` cut to what the engine's context leaves after the
    prompt (`max_model_len`, where it has one), so the plan closes within it rather
    than being cut off there."""
    context = getattr(engine, "max_model_len", None)
    if not isinstance(context, int) or params.max_tokens <= context - prompt_len:
        return params
    return dataclasses.replace(params, max_tokens=max(context - prompt_len, 1))
