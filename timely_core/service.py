"""PlanningService: many robots' planning requests on one engine, generated in
segments and scheduled by time utility (TimelyLLM), or by a baseline policy.

One loop, run by a background thread on a real clock (`start`) or stepped by the
caller in virtual time (`run_until_idle`, `run_until`): at every engine iteration
it ranks the queue (the policy; Eq. 4 for `timely`), admits greedily under the
batch cap, the latency guide and KV memory, runs one `Engine.step`, and feeds each
new token to its generation's segmenter. A completed segment is delivered to the
caller at once; under segmented policies the generation is then suspended in the
engine (its KV handled by `handling_strategy`) and re-queued with the priority of
its next segment (TUF1, measured from the estimated end of the robot's execution).

All state is guarded by one lock; engine calls happen under it, callbacks after it
is released. See docs/service-api.md for the contract.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from timely_core.batch_control import LatencyGuidedBatch, RunningBudget
from timely_core.clock import Clock, MonotonicClock
from timely_core.detokenizer import IncrementalDetokenizer
from timely_core.engine.protocol import Engine, OutOfKvMemory, SamplingParams, StepOutput
from timely_core.errors import (
    DuplicateTask,
    PromptTooLong,
    QueueFull,
    ServiceStopped,
    TaskFinished,
    UnknownRobot,
    UnknownTask,
)
from timely_core.events import Segment
from timely_core.generation import Generation, GenerationState, SegmentRecord
from timely_core.plan_language import PlanLanguage
from timely_core.policies import DispatchMode, Policy, make_policy
from timely_core.queue_table import QueueEntry
from timely_core.request import TaskRequest
from timely_core.robots import (
    Robot,
    StoredPrefix,
    encode_prefix,
    encode_request,
    prefix_key,
    resolve_language,
    validate_robot_id,
)
from timely_core.scheduler import Scheduler
from timely_core.segmenter import SegmentationError, SegmentCut, Segmenter
from timely_core.service_config import ServiceConfig
from timely_core.stats import ServiceStats
from timely_core.task_handle import TaskHandle

log = logging.getLogger(__name__)

_Delivery = Callable[[], None]
CANCELLED = "cancelled"


class PlanningService:
    def __init__(
        self,
        engine: Engine,
        tokenizer: Any,
        policy: str | Policy = "timely",
        clock: Clock | None = None,
        max_queue: int | None = None,
        config: ServiceConfig | None = None,
        languages: Mapping[str, PlanLanguage] | None = None,
    ) -> None:
        """`tokenizer` is the checkpoint's `tokenizers.Tokenizer` (encode/decode).
        `languages` maps robot types to plan languages for `register_robot(robot_type=)`."""
        config = config or ServiceConfig()
        if max_queue is not None:
            config = config.model_copy(update={"max_queue": max_queue})
            ServiceConfig.model_validate(config.model_dump())
        self.config = config
        self.engine = engine
        self.tokenizer = tokenizer
        self.clock: Clock = clock or MonotonicClock()
        self.policy: Policy = (
            make_policy(policy, config.min_slack_s) if isinstance(policy, str) else policy
        )
        self._languages = dict(languages or {})
        batch = LatencyGuidedBatch(config.wcet_segment_tokens, admit_per_step=config.admit_per_step)
        self._scheduler = Scheduler(self.policy, batch, config.max_batch_size)
        self._params = SamplingParams(temperature=0.0, max_tokens=config.max_tokens)
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._robots: dict[str, Robot] = {}
        self._prefixes: dict[str, StoredPrefix] = {}
        self._generations: dict[str, Generation] = {}  # by task id, finished ones too
        self._handles: dict[str, TaskHandle] = {}
        self._by_gen_id: dict[int, Generation] = {}  # live only
        self._running: dict[int, Generation] = {}
        self._pending: list[tuple[float, int, str]] = []  # (arrival, seq, task id) heap
        self._deliveries: list[_Delivery] = []
        self._delivery_lock = threading.RLock()  # batches reach handles in order
        self._next_gen_id = 0
        self._counters = dict.fromkeys(
            (
                "submitted",
                "succeeded",
                "failed",
                "cancelled",
                "rejected",
                "segments",
                "iterations",
                "decisions",
            ),
            0,
        )
        self._decision_time_s = 0.0
        self._thread: threading.Thread | None = None
        self._stopping = False

    # ---------------------------------------------------------------- robots

    def register_robot(
        self,
        robot_id: str,
        language: PlanLanguage | None = None,
        prompt_prefix: str | None = None,
        robot_type: str | None = None,
        max_segment_tokens: int | None = None,
    ) -> None:
        """Register (or re-register) a robot with its plan language, given directly or
        by `robot_type` from the service's `languages`. The prompt prefix (default: the
        language's) is prefilled in the engine once per robot type and text."""
        validate_robot_id(robot_id)
        language = resolve_language(robot_id, language, robot_type, self._languages)
        limit = max_segment_tokens or self.config.max_segment_tokens
        if limit < 1:
            raise ValueError(f"max_segment_tokens must be >= 1, got {limit}")
        text = language.prompt_prefix() if prompt_prefix is None else prompt_prefix
        key = prefix_key(language.robot_type, text)
        with self._lock:
            prefix = self._prefixes.get(key)
            if prefix is None:
                ids = encode_prefix(self.tokenizer, text)
                prefix = StoredPrefix(key if ids else None, tuple(ids))
                if ids:
                    self.engine.register_prefix(key, ids)
                self._prefixes[key] = prefix
            self._robots[robot_id] = Robot(robot_id, language, prefix, limit)

    def robots(self) -> dict[str, str]:
        """Registered robot ids and their robot types."""
        with self._lock:
            return {rid: r.language.robot_type for rid, r in self._robots.items()}

    # ---------------------------------------------------------------- submit

    def submit(self, request: TaskRequest | Mapping[str, Any]) -> TaskHandle:
        """Accept a request now. Raises pydantic ValidationError, UnknownRobot,
        PromptTooLong, DuplicateTask or QueueFull; nothing else is disturbed."""
        return self._submit(request, None)

    def submit_at(self, t_s: float, request: TaskRequest | Mapping[str, Any]) -> TaskHandle:
        """Accept a request that arrives at `t_s` on the service clock (virtual-time
        replays); validated now, queued when the clock reaches `t_s`."""
        return self._submit(request, t_s)

    def _submit(self, request: TaskRequest | Mapping[str, Any], at_s: float | None) -> TaskHandle:
        if not isinstance(request, TaskRequest):
            request = TaskRequest.model_validate(request)
        with self._lock:
            robot = self._robots.get(request.robot_id)
        if robot is None:
            raise UnknownRobot(
                f"unknown robot id {request.robot_id!r}; register it first "
                f"(registered: {', '.join(sorted(self.robots())) or 'none'})"
            )
        request_text = robot.language.format_request(request.scene, request.instruction)
        prompt_ids = list(robot.prefix.token_ids) + encode_request(self.tokenizer, request_text)
        if len(prompt_ids) > self.config.max_prompt_tokens:
            raise PromptTooLong(
                f"prompt of robot {request.robot_id!r} has {len(prompt_ids)} tokens, more "
                f"than max_prompt_tokens={self.config.max_prompt_tokens}; shorten the "
                "scene or instruction"
            )
        with self._wake:
            if self._stopping:
                raise ServiceStopped("the service is stopped")
            waiting = self._waiting_first()
            now = self.clock.now()
            arrives_now = at_s is None or at_s <= now
            if arrives_now and waiting >= self.config.max_queue:
                self._counters["rejected"] += 1
                raise QueueFull(
                    f"queue full: {waiting} tasks wait for the engine "
                    f"(max_queue={self.config.max_queue}); retry later"
                )
            seq = self._next_gen_id
            self._next_gen_id += 1
            task_id = request.task_id or f"task-{seq}"
            if task_id in self._generations:
                raise DuplicateTask(f"task id {task_id!r} was already submitted")
            arrival = now if at_s is None else float(at_s)
            segmenter = Segmenter(
                IncrementalDetokenizer(self.tokenizer, prompt_ids),
                robot.language.new_parser(),
                robot.max_segment_tokens,
            )
            generation = Generation(
                gen_id=seq,
                seq=seq,
                task_id=task_id,
                request=request,
                language=robot.language,
                prefix_id=robot.prefix.prefix_id or "",
                prompt_ids=prompt_ids,
                arrival_s=arrival,
                segmenter=segmenter,
            )
            handle = TaskHandle(self, task_id, request.robot_id)
            self._generations[task_id] = generation
            self._handles[task_id] = handle
            self._by_gen_id[seq] = generation
            self._counters["submitted"] += 1
            if arrival > now:
                generation.state = GenerationState.PENDING
                heapq.heappush(self._pending, (arrival, seq, task_id))
            else:
                self._enqueue(generation)
            self._wake.notify_all()
            return handle

    def _waiting_first(self) -> int:
        """Tasks that have arrived and wait for their first admission (max_queue)."""
        return sum(
            1
            for g in self._by_gen_id.values()
            if g.state is GenerationState.QUEUED and not g.in_engine
        )

    def _enqueue(self, generation: Generation) -> None:
        generation.state = GenerationState.QUEUED
        tuf = generation.request.tuf
        self._scheduler.enqueue(
            QueueEntry(
                gen_id=generation.gen_id,
                seq=generation.seq,
                ref_s=generation.segment_ref_s(),
                ert_s=generation.segment_ert_s(),
                slope=tuf.slope,
                initial_utility=tuf.initial_utility,
                segment_generation_s=self.config.segment_generation_s,
                arrival_s=generation.arrival_s,
                initial_deadline_s=generation.arrival_s + tuf.expected_response_time_s,
            )
        )

    # ---------------------------------------------------------------- task control

    def handle(self, task_id: str) -> TaskHandle:
        with self._lock:
            if task_id not in self._handles:
                raise UnknownTask(f"unknown task id {task_id!r}")
            return self._handles[task_id]

    def segment_done(self, task_id: str, index: int, finished_at_s: float | None = None) -> None:
        """The robot finished segment `index` of `task_id` at `finished_at_s`."""
        with self._lock:
            generation = self._generations.get(task_id)
            if generation is None:
                raise UnknownTask(f"unknown task id {task_id!r}")
            if not 0 <= index < len(generation.records):
                raise ValueError(
                    f"task {task_id!r} has no dispatched segment {index} "
                    f"({len(generation.records)} dispatched)"
                )
            finished = self.clock.now() if finished_at_s is None else float(finished_at_s)
            generation.records[index].finished_at_s = finished
            if generation.gen_id in self._scheduler:
                self._scheduler.set_ref(generation.gen_id, generation.segment_ref_s())

    def cancel(self, task_id: str) -> None:
        """Stop a task and free its KV at once; its result says 'cancelled'."""
        with self._lock:
            generation = self._generations.get(task_id)
            if generation is None:
                raise UnknownTask(f"unknown task id {task_id!r}")
            if generation.state is GenerationState.FINISHED:
                raise TaskFinished(f"task {task_id!r} has already finished")
            self._end(generation, error=CANCELLED)
            self._counters["cancelled"] += 1
        self._run_deliveries()

    # ---------------------------------------------------------------- loop

    def start(self) -> None:
        """Run the scheduling loop in a background thread (real clock)."""
        with self._lock:
            if self._thread is not None:
                return
            self._stopping = False
            self._thread = threading.Thread(
                target=self._serve, name="planning-service", daemon=True
            )
            self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the background thread; unfinished tasks stay as they are."""
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)

    def _serve(self) -> None:
        while True:
            with self._wake:
                if self._stopping:
                    return
                worked = self._tick_guarded()
                if not worked and not self._deliveries:
                    self._wake.wait(self._idle_wait_s())
            self._run_deliveries()

    def _next_arrival_s(self) -> float | None:
        """Arrival time of the next pending task (tasks cancelled before arriving are
        dropped here, so the virtual clock never jumps for them)."""
        while self._pending:
            _, _, task_id = self._pending[0]
            if self._generations[task_id].state is GenerationState.PENDING:
                return self._pending[0][0]
            heapq.heappop(self._pending)
        return None

    def _idle_wait_s(self) -> float:
        next_arrival = self._next_arrival_s()
        if next_arrival is None:
            return self.config.idle_wait_s
        return min(max(next_arrival - self.clock.now(), 0.0), self.config.idle_wait_s)

    def run_until_idle(self, max_iterations: int = 1_000_000) -> None:
        """Step until no task is pending, queued or running (virtual time: the clock
        jumps to the next arrival when nothing else can happen)."""
        self._run(None, max_iterations)

    def run_until(self, t_s: float, max_iterations: int = 1_000_000) -> None:
        """Step until the clock reaches `t_s` or nothing is left to do before it."""
        self._run(t_s, max_iterations)

    def _run(self, until_s: float | None, max_iterations: int) -> None:
        for _ in range(max_iterations):
            with self._lock:
                if until_s is not None and self.clock.now() >= until_s:
                    worked, next_arrival = True, None
                    done = True
                else:
                    done = False
                    worked = self._tick_guarded()
                    next_arrival = self._next_arrival_s()
            self._run_deliveries()
            if done:
                return
            if worked:
                continue
            if next_arrival is None or (until_s is not None and next_arrival > until_s):
                if until_s is not None:
                    self.clock.sleep_until(until_s)
                return
            self.clock.sleep_until(next_arrival)
        raise RuntimeError(f"the service did not become idle within {max_iterations} iterations")

    def _tick_guarded(self) -> bool:
        try:
            return self._tick()
        except Exception as exc:  # an engine failure ends the running tasks, not the service
            log.exception("engine iteration failed")
            failed = list(self._running.values())
            for generation in failed:
                self._end(generation, error=f"engine failure: {exc}")
                self._counters["failed"] += 1
            return bool(failed)

    def _tick(self) -> bool:
        """One scheduling point and one engine iteration. False if nothing ran."""
        now = self.clock.now()
        self._release_arrivals(now)
        self._admit(now)
        if not self._running:
            self._fail_unfittable()
            return False
        started = self.clock.now()
        batch = list(self._running)
        outputs = self.engine.step(batch)
        finished_at = self.clock.now()
        self._counters["iterations"] += 1
        self._scheduler.batch.record_iteration(finished_at - started, len(batch))
        for output in outputs:
            generation = self._running.get(output.gen_id)
            if generation is None:
                continue
            try:
                self._on_token(generation, output, finished_at)
            except Exception as exc:  # e.g. a language's execution-time model: this task only
                log.exception("task %s failed", generation.task_id)
                if generation.state is not GenerationState.FINISHED:
                    self._end(generation, error=f"internal error: {exc!r}")
                    self._counters["failed"] += 1
        return True

    def _release_arrivals(self, now: float) -> None:
        while self._pending and self._pending[0][0] <= now:
            _, _, task_id = heapq.heappop(self._pending)
            generation = self._generations[task_id]
            if generation.state is not GenerationState.PENDING:
                continue  # cancelled before it arrived
            if self._waiting_first() >= self.config.max_queue:
                self._counters["rejected"] += 1
                self._end(
                    generation,
                    error=f"queue full at arrival (max_queue={self.config.max_queue})",
                )
                continue
            self._enqueue(generation)

    def _admit(self, now: float) -> None:
        if not len(self._scheduler):
            return
        running = [
            RunningBudget(g.segment_deadline_s(), g.segment_tokens)
            if self.policy.latency_guided_batch
            else RunningBudget(0.0, 0)  # only counted against the batch cap
            for g in self._running.values()
        ]
        started = time.perf_counter()
        chosen = self._scheduler.decide(now, running, self._fits)
        self._decision_time_s += time.perf_counter() - started
        self._counters["decisions"] += 1
        for gen_id in chosen:
            generation = self._by_gen_id[gen_id]
            try:
                if not generation.in_engine:
                    self.engine.add(
                        gen_id, generation.prompt_ids, self._params, generation.prefix_id or None
                    )
                    generation.in_engine = True
                elif generation.suspended:
                    self.engine.resume(gen_id)
                    generation.suspended = False
            except OutOfKvMemory:
                return  # stays queued; memory frees as running generations end
            except Exception as exc:  # this generation only: the engine refused it
                log.exception("engine refused generation %d", gen_id)
                self._end(generation, error=f"engine refused the generation: {exc}")
                self._counters["failed"] += 1
                continue
            self._scheduler.remove(gen_id)
            generation.state = GenerationState.RUNNING
            self._running[gen_id] = generation

    def _fits(self, gen_id: int) -> bool:
        generation = self._by_gen_id[gen_id]
        if not generation.in_engine:
            return self.engine.can_admit(len(generation.prompt_ids), generation.prefix_id or None)
        return True  # suspended: resume() reports OutOfKvMemory itself

    def _fail_unfittable(self) -> None:
        """Nothing runs, yet the best queued generation does not fit: it never will."""
        if not len(self._scheduler):
            return
        order = self.policy.order(self._scheduler.table, self.clock.now())
        gen_id = int(self._scheduler.table.gen_id[order[0]])
        generation = self._by_gen_id[gen_id]
        if generation.in_engine:
            return
        memory = self.engine.memory()
        if memory.device_blocks_free < memory.device_blocks_total - memory.pinned_prefix_blocks:
            return  # someone still holds memory (a suspended generation); wait for it
        self._end(
            generation,
            error=f"prompt of {len(generation.prompt_ids)} tokens does not fit in KV memory",
        )
        self._counters["failed"] += 1

    # ---------------------------------------------------------------- tokens

    def _on_token(self, generation: Generation, output: StepOutput, now: float) -> None:
        if output.finished:
            generation.in_engine = False  # the engine freed it
            self._running.pop(generation.gen_id, None)
        terminal = output.finished and output.token_id in self._terminal_ids()
        cuts: list[SegmentCut] = []
        try:
            if not terminal:
                generation.segment_tokens += 1
                cut = generation.segmenter.push(output.token_id)
                if cut is not None:
                    cuts.append(cut)
            if output.finished:
                tail = generation.segmenter.close()
                if tail is not None:
                    cuts.append(tail)
        except SegmentationError as exc:
            self._end(generation, error=str(exc))
            self._counters["failed"] += 1
            return
        for i, cut in enumerate(cuts):
            self._on_cut(generation, cut, now, final=output.finished and i == len(cuts) - 1)
        if output.finished:
            self._finish(generation, now)
        elif cuts and self.policy.suspend_after_segment:
            self.engine.suspend(generation.gen_id, self.config.handling_strategy)
            generation.suspended = True
            self._running.pop(generation.gen_id, None)
            self._enqueue(generation)

    def _terminal_ids(self) -> set[int]:
        return {self.engine.eos_token_id, *self._params.stop_token_ids}

    def _on_cut(self, generation: Generation, cut: SegmentCut, now: float, final: bool) -> None:
        if self.policy.dispatch is DispatchMode.WHOLE:
            generation.held_statements.extend(cut.statements)
            generation.held_text += cut.text
            generation.held_ids.extend(cut.token_ids)
            return
        self._dispatch(generation, cut.text, cut.statements, cut.token_ids, now, final)

    def _dispatch(
        self,
        generation: Generation,
        text: str,
        statements: tuple[Any, ...] | list[Any],
        token_ids: tuple[int, ...] | list[int],
        now: float,
        final: bool,
    ) -> None:
        minimum_s, _ = generation.language.estimate_execution_s(list(statements))
        segment = Segment(
            task_id=generation.task_id,
            robot_id=generation.robot_id,
            index=generation.next_index,
            text=text,
            statements=tuple(statements),
            token_ids=tuple(token_ids),
            estimated_execution_s=minimum_s,
            emitted_at_s=now,
            final=final,
        )
        generation.records.append(
            SegmentRecord(segment, now + self.config.dispatch_latency_s, minimum_s)
        )
        generation.segment_tokens = 0
        self._counters["segments"] += 1
        handle = self._handles[generation.task_id]
        self._deliveries.append(lambda: handle.deliver_segment(segment))

    def _finish(self, generation: Generation, now: float) -> None:
        if self.policy.dispatch is DispatchMode.WHOLE and generation.held_statements:
            self._dispatch(
                generation,
                generation.held_text,
                generation.held_statements,
                generation.held_ids,
                now,
                final=True,
            )
        if not generation.records:
            self._end(generation, error="the model produced no executable statement")
            self._counters["failed"] += 1
            return
        self._end(generation, error="")
        self._counters["succeeded"] += 1

    def _end(self, generation: Generation, error: str) -> None:
        """Take the generation out of everything (freeing its KV) and deliver its result."""
        if generation.in_engine:
            self.engine.abort(generation.gen_id)
            generation.in_engine = False
        if generation.gen_id in self._scheduler:
            self._scheduler.remove(generation.gen_id)
        self._running.pop(generation.gen_id, None)
        self._by_gen_id.pop(generation.gen_id, None)
        generation.state = GenerationState.FINISHED
        result = generation.result(error, self.clock.now())
        handle = self._handles[generation.task_id]
        self._deliveries.append(lambda: handle.deliver_result(result))

    def _run_deliveries(self) -> None:
        with self._delivery_lock:
            with self._lock:
                deliveries, self._deliveries = self._deliveries, []
            for deliver in deliveries:
                deliver()

    # ---------------------------------------------------------------- stats

    def stats(self) -> ServiceStats:
        with self._lock:
            memory = self.engine.memory()
            live = list(self._by_gen_id.values())
            counters = self._counters
            return ServiceStats(
                policy=self.policy.name,
                queued=len(self._scheduler),
                waiting_first=self._waiting_first(),
                running=len(self._running),
                suspended=sum(1 for g in live if g.suspended),
                pending_arrivals=sum(1 for g in live if g.state is GenerationState.PENDING),
                submitted=counters["submitted"],
                succeeded=counters["succeeded"],
                failed=counters["failed"],
                cancelled=counters["cancelled"],
                rejected=counters["rejected"],
                segments_emitted=counters["segments"],
                iterations=counters["iterations"],
                decisions=counters["decisions"],
                decision_time_s=self._decision_time_s,
                kv_device_blocks_free=memory.device_blocks_free,
                kv_device_blocks_total=memory.device_blocks_total,
            )
