"""PlanningService: many robots' planning requests on one engine, generated in
segments and scheduled by time utility (TimelyLLM), or by a baseline policy.

The service is a facade over a few parts, each in its own module:
- `service_state`: what the parts share, guarded by one lock;
- `admission`: a request validated and tokenized, then queued as a `Generation`;
- `service_loop`: engine iterations on a background thread (real clock) or
  stepped by the caller in virtual time (`run_until_idle`, `run_until`);
- `engine_iteration`: one scheduling point (the policy ranks the queue; admission
  under the batch cap, the latency guide and KV memory) and one `Engine.step`;
- `segment_dispatch`: each new token through its segmenter; completed segments
  delivered, the generation suspended and re-queued with the priority of its next
  segment (TUF1, from the estimated end of the robot's execution).
Engine calls happen under the state's engine gate, the bookkeeping around them
under its lock (released during each engine step, so submissions never wait for
one), the handles' callbacks after both are released.
See docs/service-api.md for the contract.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Mapping
from typing import Any

from timely_core.clock import Clock, MonotonicClock
from timely_core.engine.plan_candidates import CandidateEngine
from timely_core.engine.protocol import Engine, EngineError, OutOfKvMemory
from timely_core.engine.variants import ResidentWeights
from timely_core.errors import TaskFinished, UnknownPolicy, UnknownRobot, UnknownTask
from timely_core.events import Rollback
from timely_core.language.plan_language import PlanLanguage, SkillNames
from timely_core.language.statement_guard import GuardFactory
from timely_core.request import SceneUpdate, TaskRequest
from timely_core.scheduling.policies import Policy, make_policy
from timely_core.service_config import ServiceConfig
from timely_core.serving.admission import admit, check_request
from timely_core.serving.candidate_fit import plan_fits
from timely_core.serving.execution_feedback import report_execution
from timely_core.serving.failure_recovery import FailureRecovery
from timely_core.serving.generation import Generation, GenerationState, SegmentRecord
from timely_core.serving.literal_text import literal_tokenizer
from timely_core.serving.loop import ServiceLoop
from timely_core.serving.robots import (
    Robot,
    StoredPrefix,
    check_room,
    encode_prefix,
    encode_request,
    prefix_key,
    request_header_ids,
    resolve_language,
    validate_robot_id,
)
from timely_core.serving.state import ServiceState
from timely_core.serving.variants import check_variant, register_variant_prefix, resident_weights
from timely_core.stats import ServiceStats
from timely_core.task_handle import TaskHandle
from timely_core.tools.answer_times import AnswerStats
from timely_core.tools.process import ToolInfo
from timely_core.tools.router import ToolOutcome
from timely_core.tools.spec import ToolSpec

__all__ = ["CANCELLED", "PlanningService", "ServiceStats", "TaskHandle"]

CANCELLED = "cancelled"
# how far past now a report may be (a simulated robot's end, reported ahead), and how
# far before now an arrival (`submit_at`) may be
REPORT_LEAD_S = 3600.0


class PlanningService:
    def __init__(
        self,
        engine: Engine,
        tokenizer: Any,
        policy: str | Policy = "timely",
        clock: Clock | None = None,
        max_queue: int | None = None,
        config: ServiceConfig | Mapping[str, Any] | None = None,
        languages: Mapping[str, PlanLanguage] | None = None,
    ) -> None:
        """`tokenizer` is the checkpoint's `tokenizers.Tokenizer` (encode/decode).
        `config`: a ServiceConfig or its fields as a mapping (validated).
        `languages` maps robot types to plan languages for `register_robot(robot_type=)`.
        Raises TypeError naming an argument that cannot be what it stands for, and
        pydantic ValidationError for a bad config, before anything starts."""
        config = checked_config(config, max_queue)
        check_parts(engine, tokenizer, clock)
        if isinstance(policy, str):
            policy = make_policy(policy, config.min_slack_s)
        elif not callable(getattr(policy, "order", None)):
            raise UnknownPolicy(
                f"policy must be a policy name or a Policy object, got {type(policy).__name__}"
            )
        tokenizer = literal_tokenizer(tokenizer)  # an instruction's `<eos>` is text
        if config.plan_candidates > 0:
            engine = with_plan_candidates(engine, tokenizer, config)
        self.config = config
        self.engine = engine
        self.tokenizer = tokenizer
        self.clock: Clock = clock or MonotonicClock()
        self.policy: Policy = policy
        self._state = ServiceState(engine, tokenizer, policy, self.clock, config)
        if isinstance(engine, CandidateEngine):
            engine.accept = functools.partial(plan_fits, self._state)
        self._languages = dict(languages or {})
        self._loop = ServiceLoop(self._state)
        self._recovery = FailureRecovery(self._state)

    # ---------------------------------------------------------------- robots

    def register_robot(
        self,
        robot_id: str,
        language: PlanLanguage | None = None,
        prompt_prefix: str | None = None,
        robot_type: str | None = None,
        max_segment_tokens: int | None = None,
        guard: GuardFactory | None = None,
        variant: str | None = None,
    ) -> None:
        """Register (or re-register) a robot with its plan language, given directly or
        by `robot_type` from the service's `languages`. The prompt prefix (default: the
        language's) and the fixed opening of the language's request part are prefilled in
        the engine once per robot type, text and variant. `guard` makes a
        `StatementGuard` per task: the robot's safety limits, checked on each statement
        before delivery. `variant`: the fleet variant (a LoRA adapter the engine loaded)
        every plan of the robot runs with; None: the base model (VariantUnavailable if
        the engine does not serve it)."""
        validate_robot_id(robot_id)
        check_variant(self._state.engine, robot_id, variant)
        language = resolve_language(robot_id, language, robot_type, self._languages)
        limit = self.config.max_segment_tokens if max_segment_tokens is None else max_segment_tokens
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"max_segment_tokens must be an int, got {limit!r}")
        if prompt_prefix is not None and not isinstance(prompt_prefix, str):
            raise TypeError(f"prompt_prefix must be a str, got {type(prompt_prefix).__name__}")
        if limit < 1:
            raise ValueError(f"max_segment_tokens must be >= 1, got {limit}")
        text = language.prompt_prefix() if prompt_prefix is None else prompt_prefix
        state = self._state
        header = request_header_ids(state.tokenizer, language) if text else []
        empty = len(encode_request(state.tokenizer, language.format_request("", "")))
        key = prefix_key(language.robot_type, text, header, variant)
        with state.engine_gate.caller(), state.lock:
            prefix = state.prefixes.get(key)
            if prefix is None:
                ids = encode_prefix(state.tokenizer, text)
                check_room(robot_id, len(ids), empty, limit, state)
                cached = bool(ids) and state.config.prefix_cache
                prefix = StoredPrefix(key if cached else None, tuple(ids), tuple(header), variant)
                if cached:
                    try:
                        register_variant_prefix(state.engine, key, list(prefix.shared_ids), variant)
                    except OutOfKvMemory as exc:
                        raise OutOfKvMemory(f"robot {robot_id!r}: {exc}") from exc
                state.prefixes[key] = prefix
            else:
                check_room(robot_id, len(prefix.token_ids), empty, limit, state)
            previous = state.robots.get(robot_id)
            state.robots[robot_id] = Robot(robot_id, language, prefix, limit, guard, variant)
            if previous is not None and previous.prefix is not prefix:
                state.release_prefix(previous.prefix)
                orphan = state.scenes.detach(robot_id)  # prefilled on the old prefix
                if orphan is not None:
                    state.scenes.forget(orphan)
                state.signal_work()

    def publish_scene(self, robot_id: str, scene: str) -> None:
        """Record what `robot_id` currently perceives. A task submitted with an empty
        scene plans in this one; once it has stood for `scene_debounce_s` it is
        prefilled ahead of the robot's tasks (Teola), within the scene KV budget
        (`scene_kv_fraction`). An empty scene withdraws the robot's scene. Raises
        pydantic ValidationError (bad text) or UnknownRobot."""
        update = SceneUpdate(robot_id=robot_id, scene=scene)
        state = self._state
        with state.wake:
            if update.robot_id not in state.robots:
                raise UnknownRobot(f"unknown robot id {update.robot_id!r}; register it first")
            orphan = state.scenes.publish(update.robot_id, update.scene, state.clock.now())
            if orphan is not None:
                state.scenes.forget(orphan)  # the loop unpins it
            state.signal_work()

    def scene(self, robot_id: str) -> str:
        """The scene `robot_id` last published ("" if none)."""
        with self._state.lock:
            return self._state.scenes.text(robot_id)

    def robots(self) -> dict[str, str]:
        """Registered robot ids and their robot types."""
        with self._state.lock:
            return {rid: r.language.robot_type for rid, r in self._state.robots.items()}

    def robot_variants(self) -> dict[str, str | None]:
        """Registered robot ids and the fleet variant each plans with (None: the base)."""
        with self._state.lock:
            return {rid: r.variant for rid, r in self._state.robots.items()}

    def resident_weights(self) -> ResidentWeights | None:
        """The engine's model weights: the base once, each loaded fleet variant's own
        bytes (`timely_core.engine.variants`); None when the engine does not report
        them (the simulator)."""
        state = self._state
        with state.engine_gate.caller():
            return resident_weights(state.engine)

    # ---------------------------------------------------------------- tools

    def register_tool(self, robot_id: str, spec: ToolSpec | Mapping[str, Any]) -> ToolInfo:
        """Start a tool plugin (Conveyor) in its own process for `robot_id`'s tasks:
        it gets their calls of the skills it consumes as they are decoded. Returns
        what it consumes and whether its network is isolated. Raises pydantic
        ValidationError, UnknownRobot, ToolStartError, or ValueError for a tool of
        skills the robot's plans never call (docs/service-api.md)."""
        spec = spec if isinstance(spec, ToolSpec) else ToolSpec.model_validate(spec)
        with self._state.lock:
            robot = self._state.robots.get(robot_id)
            if robot is None:
                raise UnknownRobot(f"unknown robot id {robot_id!r}; register it first")
        language = robot.language
        calls = language.skill_names() if isinstance(language, SkillNames) else None
        return self._state.tools.register(robot_id, spec, calls)

    def unregister_tool(self, robot_id: str, name: str) -> None:
        """Stop a robot's tool (KeyError if it has none of that name)."""
        self._state.tools.unregister(robot_id, name)

    def tool_answer_stats(self, robot_id: str, name: str) -> AnswerStats:
        """How long `robot_id`'s tool `name` took to answer (its `expected_s` before any)."""
        return self._state.tools.answer_stats(robot_id, name)

    def tool_outcomes(self, task_id: str) -> list[ToolOutcome]:
        """The tools' replies to `task_id`'s calls so far (values, observations, errors)."""
        return self._state.tools.outcomes(task_id)

    def close_tools(self) -> None:
        """Stop every tool process (their unanswered calls end with an error)."""
        self._state.tools.close()

    # ---------------------------------------------------------------- submit

    def submit(self, request: TaskRequest | Mapping[str, Any]) -> TaskHandle:
        """Accept a request now. Raises pydantic ValidationError, UnknownRobot,
        PromptTooLong, DuplicateTask or QueueFull; nothing else is disturbed."""
        return admit(self._state, self, request, None)

    def check(self, request: TaskRequest | Mapping[str, Any]) -> None:
        """Raise what `submit` would for the request itself (ValidationError,
        UnknownRobot, PromptTooLong: its prompt too long in the robot's current
        scene), submitting nothing; the queue's state is not checked."""
        check_request(self._state, request)

    def submit_at(self, t_s: float, request: TaskRequest | Mapping[str, Any]) -> TaskHandle:
        """Accept a request that arrives at `t_s` on the service clock (virtual-time
        replays); validated now, queued when the clock reaches `t_s`. Raises
        TypeError or ValueError for a `t_s` that is not a finite time on the service
        clock (more than REPORT_LEAD_S before now: another clock's)."""
        if isinstance(t_s, bool) or not isinstance(t_s, numbers.Real):
            raise TypeError(f"t_s must be a time on the service clock, got {type(t_s).__name__}")
        now = self._state.clock.now()
        if not math.isfinite(float(t_s)) or t_s < now - REPORT_LEAD_S:
            raise ValueError(
                f"t_s={t_s:.6g} is not a time on the service clock (now is {now:.6g}); "
                "arrival times come from service.clock.now()"
            )
        return admit(self._state, self, request, t_s)

    # ---------------------------------------------------------------- task control

    def handle(self, task_id: str) -> TaskHandle:
        with self._state.lock:
            if task_id not in self._state.handles:
                raise UnknownTask(f"unknown task id {task_id!r}")
            return self._state.handles[task_id]

    def generation_request(self, gen_id: int) -> TaskRequest | None:
        """The request of the live task whose engine generation is `gen_id` (None
        once it ended): an engine is handed only gen_ids, and may look a task's TUF up
        here, from its own methods (set_ranking, step) too."""
        with self._state.lock:
            generation = self._state.by_gen_id.get(gen_id)
            return None if generation is None else generation.request

    def segment_done(self, task_id: str, index: int, finished_at_s: float | None = None) -> None:
        """The robot finished segment `index` of `task_id` at `finished_at_s` (service
        clock; now if omitted). Corrects the timing of the task's next segment and,
        on the first report of a segment, refines the robot's execution-time model
        when its language learns (`execution_feedback`), also after the result.
        A plan held open for its robot's reports (`replan_on_failure`,
        `result_after_reports`) ends with the report of its last segment; a report
        after the task ended (failed, cancelled, a repeated report) changes nothing
        in its result."""
        state = self._state
        with state.lock:
            generation, record = self._dispatched(task_id, index)
            first_report = record.finished_at_s is None
            record.finished_at_s = self._report_time(finished_at_s, generation, "finished_at_s")
            if generation.gen_id in state.scheduler:
                state.scheduler.set_ref(generation.gen_id, generation.segment_ref_s())
            if first_report:
                report_execution(generation, index)
            state.kv_handling.on_segment_done(generation, index, first_report)
            # (a task that ended has awaiting_reports cleared: a late report ends nothing)
            ended = generation.awaiting_reports and all(
                r.finished_at_s is not None for r in generation.records
            )
            if ended:  # its result waited for the robot (replan_on_failure)
                state.end(generation, error="")
                state.counters["succeeded"] += 1
        if ended:
            state.run_deliveries()

    def segment_failed(
        self,
        task_id: str,
        index: int,
        error: str,
        failed_at_s: float | None = None,
        element: int | None = None,
    ) -> Rollback | None:
        """The robot failed segment `index` of `task_id` at `failed_at_s` (service
        clock; now if omitted) with `error`. With `replan_on_failure` on a rewritable
        engine, within `max_recoveries`: the generation is rolled back to the end
        of that segment, the failure appended as an observation, planning goes on
        from segment index + 1 (the `Rollback` returned, also delivered to the
        handle). Otherwise the task ends with the robot's error (None returned).
        `element`: the robot failed that element (`StreamedElement.element`) of a
        streamed segment, which may still be decoded: then its later elements are
        not handed on and the rollback waits for its cut (None returned; the
        Rollback or the result follows). Raises UnknownTask, TaskFinished, or
        ValueError for a segment (or element) not dispatched or already reported;
        no other task is disturbed."""
        if not isinstance(error, str):
            raise TypeError(f"error must be a str, got {type(error).__name__}")
        state = self._state
        if element is not None:  # a streamed segment's (failure_recovery.py)
            with state.engine_gate.caller(), state.lock:
                streamed = state.generations.get(task_id)  # its segment may be decoding
                if streamed is None:
                    raise UnknownTask(f"unknown task id {task_id!r}")
                at_s = self._report_time(failed_at_s, streamed, "failed_at_s")
                rollback = self._recovery.on_element_failure(task_id, index, element, error, at_s)
            state.run_deliveries()
            return rollback
        with state.engine_gate.caller(), state.lock:  # it rewrites: not inside a step
            ended = state.generations.get(task_id)
            if ended is not None and ended.state is GenerationState.FINISHED:
                request = ended.request
                if request.replan_on_failure or request.result_after_reports:
                    why = "cannot be replanned"
                else:  # a result at the plan's decoding: the robot's failure comes after
                    why = (
                        "is not in its result, which came when its plan was decoded "
                        "(result_after_reports=True makes the result wait for the "
                        "robot's reports, replan_on_failure=True replans)"
                    )
                raise TaskFinished(
                    f"task {task_id!r} has already ended; its failed segment {index} {why}"
                )
            generation, _ = self._dispatched(task_id, index)
            reported = [
                r.segment.index for r in generation.records[index:] if r.finished_at_s is not None
            ]
            if reported:
                raise ValueError(
                    f"task {task_id!r}: segment(s) {reported} already reported, so segment "
                    f"{index} cannot have failed now"
                )
            at_s = self._report_time(failed_at_s, generation, "failed_at_s")
            rollback = self._recovery.on_failure(generation, index, error, at_s)
        state.run_deliveries()
        return rollback

    def segment_started(self, task_id: str, index: int, started_at_s: float | None = None) -> None:
        """The robot got segment `index` of `task_id` only at `started_at_s` (service
        clock; now if omitted), later than its delivery: the caller held it, e.g. for
        an operator's approval. The hold counts as the robot's waiting time (W of the
        segment) and moves the estimated end of its execution."""
        state = self._state
        with state.lock:
            generation, record = self._dispatched(task_id, index)
            at_s = self._report_time(started_at_s, generation, "started_at_s")
            record.dispatch_s = max(record.dispatch_s, at_s)
            if generation.gen_id in state.scheduler:
                state.scheduler.set_ref(generation.gen_id, generation.segment_ref_s())

    def _report_time(self, at_s: float | None, generation: Generation, what: str) -> float:
        """A robot's report time on the service clock (now if None). A time that is not
        a finite number, before the task arrived, or more than REPORT_LEAD_S after now
        (another clock's, such as `time.time()`) is refused: it would skew this task's
        timing and every later estimate of the robot's execution times."""
        now = self._state.clock.now()
        if at_s is None:
            return now
        if isinstance(at_s, bool) or not isinstance(at_s, int | float):
            raise TypeError(f"{what} must be a number, got {type(at_s).__name__}")
        t = float(at_s)
        if not math.isfinite(t):
            raise ValueError(f"{what} must be a finite time on the service clock, got {t}")
        if t > now + REPORT_LEAD_S or t < generation.arrival_s:
            raise ValueError(
                f"{what}={t:.6g} is outside task {generation.task_id!r}'s time on the service "
                f"clock (it arrived at {generation.arrival_s:.6g}, now is {now:.6g}); report "
                "times from the service's clock (service.clock.now())"
            )
        return t

    def _dispatched(self, task_id: str, index: int) -> tuple[Generation, SegmentRecord]:
        """The task's generation and its dispatched segment `index` (call holding the
        lock). Raises UnknownTask, TypeError or ValueError naming what is missing."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"segment index must be an int, got {type(index).__name__}")
        generation = self._state.generations.get(task_id)
        if generation is None:
            raise UnknownTask(f"unknown task id {task_id!r}")
        if not 0 <= index < len(generation.records):
            raise ValueError(
                f"task {task_id!r} has no dispatched segment {index} "
                f"({len(generation.records)} dispatched)"
            )
        return generation, generation.records[index]

    def cancel(self, task_id: str) -> None:
        """Stop a task and free its KV at once; its result says 'cancelled'."""
        self._end(task_id, CANCELLED, "cancelled")

    def fail(self, task_id: str, error: str) -> None:
        """End a task its caller cannot go on with, other than by a robot's failure
        of a segment (`segment_failed`): its robot lost, a segment an operator
        denied. Stopped and its KV freed as by `cancel`, but counted as failed, and
        its result's error is `error`. Raises UnknownTask or TaskFinished."""
        if not isinstance(error, str) or not error.strip():
            raise ValueError(f"error must be a non-empty str naming the failure, got {error!r}")
        self._end(task_id, error, "failed")

    def _end(self, task_id: str, error: str, counter: str) -> None:
        """End a live task with `error`, counted under `counter`, its KV freed now."""
        state = self._state
        with state.engine_gate.caller(), state.lock:  # it frees KV: not in the middle of a step
            generation = state.generations.get(task_id)
            if generation is None:
                raise UnknownTask(f"unknown task id {task_id!r}")
            if generation.state is GenerationState.FINISHED:
                raise TaskFinished(f"task {task_id!r} has already finished")
            state.end(generation, error=error)
            state.counters[counter] += 1
        state.run_deliveries()

    # ---------------------------------------------------------------- loop

    def start(self) -> None:
        """Run the scheduling loop in a background thread (real clock)."""
        self._loop.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the background thread; unfinished tasks stay as they are."""
        self._loop.stop(timeout_s)

    def run_until_idle(self, max_iterations: int = 1_000_000) -> None:
        """Step until no task is pending, queued or running (virtual time: the clock
        jumps to the next arrival when nothing else can happen)."""
        self._loop.run(None, max_iterations)

    def run_until(self, t_s: float, max_iterations: int = 1_000_000) -> None:
        """Step until the clock reaches `t_s` or nothing is left to do before it."""
        self._loop.run(t_s, max_iterations)

    # ---------------------------------------------------------------- stats

    def stats(self) -> ServiceStats:
        state = self._state
        with state.engine_gate.caller(), state.lock:
            memory = state.engine.memory()
            live = list(state.by_gen_id.values())
            counters = state.counters
            chosen = state.engine.counts if isinstance(state.engine, CandidateEngine) else {}
            return ServiceStats(
                policy=state.policy.name,
                queued=len(state.scheduler),
                waiting_first=state.waiting_first(),
                running=len(state.running),
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
                decision_time_s=state.decision_time_s,
                engine_busy_s=state.engine_busy_s,
                loop_busy_s=state.loop_busy_s,
                kv_device_blocks_free=memory.device_blocks_free,
                kv_device_blocks_total=memory.device_blocks_total,
                scene_prefixes=len(state.scenes.prefixes),
                scene_kv_blocks=state.scenes.held_blocks(),
                scene_prefills=counters["scene_prefills"],
                scene_hits=counters["scene_hits"],
                candidate_plans=chosen.get("plans", 0),
                candidate_alternatives_kept=chosen.get("alternatives_kept", 0),
                candidate_redecoded=chosen.get("redecoded", 0),
                rollbacks=counters["rollbacks"],
                tokens_rolled_back=counters["tokens_rolled_back"],
                segments_withdrawn=counters["segments_withdrawn"],
                awaiting_reports=sum(1 for g in live if g.awaiting_reports),
                awaiting_verdicts=sum(1 for g in live if g.awaiting_verdicts),
            )


def checked_config(
    config: ServiceConfig | Mapping[str, Any] | None, max_queue: int | None
) -> ServiceConfig:
    """The service's config, validated whatever form it came in."""
    if config is None:
        config = ServiceConfig()
    elif isinstance(config, Mapping):
        config = ServiceConfig.model_validate(dict(config))
    elif not isinstance(config, ServiceConfig):
        raise TypeError(
            f"config must be a ServiceConfig or a mapping of its fields, "
            f"got {type(config).__name__}"
        )
    if max_queue is not None:
        config = ServiceConfig.model_validate({**config.model_dump(), "max_queue": max_queue})
    return config


_ENGINE_METHODS = ("add", "step", "suspend", "resume", "abort")


def check_parts(engine: object, tokenizer: object, clock: object) -> None:
    """Raise TypeError naming a constructor argument without what the service calls
    on it, so a wrong object fails here and not on the first request."""
    missing = [m for m in _ENGINE_METHODS if not callable(getattr(engine, m, None))]
    if missing:
        raise TypeError(
            f"engine must implement the Engine protocol (timely_core.engine.protocol); "
            f"{type(engine).__name__} has no {', '.join(missing)}"
        )
    for method in ("encode", "decode"):
        if not callable(getattr(tokenizer, method, None)):
            raise TypeError(
                f"tokenizer must be the checkpoint's tokenizers.Tokenizer "
                f"(encode and decode); {type(tokenizer).__name__} has no {method}"
            )
    if clock is not None and not callable(getattr(clock, "now", None)):
        raise TypeError(f"clock must be a Clock (with now()), got {type(clock).__name__}")


def with_plan_candidates(engine: Engine, tokenizer: Any, config: ServiceConfig) -> Engine:
    """`engine` wrapped to decode plan candidates (`ServiceConfig.plan_candidates`);
    a ValueError naming the setting when it cannot report the log-probabilities
    they are ranked by."""
    try:
        return CandidateEngine(
            engine,
            lambda ids: str(tokenizer.decode(ids)),
            config.candidate_temperature,
            config.candidate_coverage_weight,
        )
    except EngineError as exc:
        raise ValueError(f"plan_candidates={config.plan_candidates}: {exc}") from exc
