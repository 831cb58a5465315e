"""Plans that react to a failed segment (simulated paged engine, virtual time): a
robot's failure rolls the generation back to the failed segment's end, drops the
ids and KV generated past it, appends the failure as an observation, and the
plan goes on from there; nothing generated past the failure is ever delivered."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tests.timely_core.core_support import Statement, TinyLanguage, eos_id, make_tokenizer
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.errors import TaskFinished, UnknownTask
from timely_core.events import Rollback, Segment
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.task_handle import TaskHandle

PLAN = "mf(50); search('cat'); say('found');"
RECOVERY = " tl(90); say('went around');"
OBSERVATION = "\nmf(50); failed: blocked\n"  # the default form, in OBSERVATION_FORMAT


@dataclass
class Planner:
    """Scripted planner: the plan, and after a failure observation a way around.
    Records every context it is asked about (the generation's input)."""

    contexts: list[str] = field(default_factory=list)

    def __call__(self, ids: Sequence[int]) -> list[int]:
        text = make_tokenizer().decode(list(ids))
        self.contexts.append(text)
        if text.endswith("failed: blocked\n"):
            plan = RECOVERY
        elif text.endswith("failed: still blocked\n"):
            plan = " mf(50); say('again');"
        elif "Task: fetch\n" in text or "Task: fly\n" in text:
            plan = PLAN
        else:
            raise KeyError(f"unscripted context {text[-60:]!r}")
        return make_tokenizer().encode(plan, add_special_tokens=False).ids


@dataclass
class Setup:
    service: PlanningService
    engine: Any
    clock: VirtualClock
    planner: Planner


def make(
    policy: str = "timely", config: ServiceConfig | None = None, block_size: int = 16
) -> Setup:
    clock = VirtualClock()
    planner = Planner()
    engine = SimulatedEngine(
        clock,
        PAPER_LLAMA3_8B_RTX4090,
        planner,
        SimulatedEngineConfig(eos_token_id=eos_id(), block_size=block_size),
    )
    service = PlanningService(engine, make_tokenizer(), policy, clock=clock, config=config)
    service.register_robot("drone1", TinyLanguage())
    service.register_robot("drone2", TinyLanguage())
    return Setup(service, engine, clock, planner)


def submit(setup: Setup, replan: bool = True, robot: str = "drone1") -> tuple[TaskHandle, list]:
    handle = setup.service.submit(
        TaskRequest(robot_id=robot, instruction="fetch", replan_on_failure=replan)
    )
    log: list[Segment | Rollback] = []
    handle.on_segment(log.append)
    handle.on_rollback(log.append)
    return handle, log


def generated(setup: Setup, handle: TaskHandle) -> int:
    gen = setup.service._state.generations[handle.task_id]
    return len(setup.engine.token_ids(gen.gen_id)) - len(gen.prompt_ids)


def step_until(setup: Setup, done: Any, limit_s: float = 30.0) -> None:
    """Advance virtual time in small steps until `done()`."""
    while not done():
        assert setup.clock.now() < limit_s, "never happened"
        setup.service.run_until(setup.clock.now() + 0.002)


def finish(setup: Setup, handle: TaskHandle) -> None:
    """Plan to the end, the robot reporting every segment done (a task that may
    replan keeps its result until then)."""
    gen = setup.service._state.generations[handle.task_id]
    while not handle.done():
        setup.service.run_until_idle()
        for record in list(gen.records):
            if record.finished_at_s is None and not handle.done():
                handle.segment_done(record.segment.index)


def texts(log: Sequence[Segment | Rollback]) -> list[str]:
    return [e.text.strip() if isinstance(e, Segment) else "<rollback>" for e in log]


def test_a_failure_mid_generation_is_rolled_back_and_the_plan_goes_on() -> None:
    setup = make()
    handle, log = submit(setup)
    step_until(setup, lambda: len(log) == 1)
    end0 = setup.service._state.generations[handle.task_id].records[0].generated_end
    step_until(setup, lambda: generated(setup, handle) >= end0 + 3)  # into "search(..."
    ahead = generated(setup, handle)
    assert len(log) == 1  # search('cat'); is not complete: nothing more was delivered

    rollback = setup.service.segment_failed(handle.task_id, 0, "blocked")

    assert rollback is not None
    assert rollback.tokens_dropped == ahead - end0 > 0
    assert rollback.withdrawn == () and rollback.recovery == 1
    assert rollback.observation == "mf(50); failed: blocked"
    gen = setup.service._state.generations[handle.task_id]
    context = make_tokenizer().decode(setup.engine.token_ids(gen.gen_id))
    assert context.endswith("Plan:mf(50);" + OBSERVATION)  # nothing of "search" is kept
    finish(setup, handle)
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    assert texts(log) == ["mf(50);", "<rollback>", "tl(90);", "say('went around');"]
    assert result.plan_text == "mf(50); tl(90); say('went around');"
    assert all("search" not in t for t in texts(log))
    assert any(c.endswith(OBSERVATION) for c in setup.planner.contexts)  # the input
    stats = setup.service.stats()
    assert stats.succeeded == 1 and stats.failed == 0
    assert (stats.rollbacks, stats.segments_withdrawn) == (1, 0)
    assert stats.tokens_rolled_back == rollback.tokens_dropped


def test_segments_delivered_past_the_failure_are_withdrawn_and_replaced() -> None:
    setup = make()
    handle, log = submit(setup)
    step_until(setup, lambda: len(log) == 2)  # segment 1 sent before the robot's report
    rollback = setup.service.segment_failed(handle.task_id, 0, "blocked")
    assert rollback is not None and rollback.withdrawn == (1,)
    finish(setup, handle)
    assert texts(log) == [
        "mf(50);",
        "search('cat');",  # delivered ahead, then withdrawn
        "<rollback>",
        "tl(90);",  # index 1 again
        "say('went around');",
    ]
    after = [e for e in log[log.index(rollback) :] if isinstance(e, Segment)]
    assert [s.index for s in after] == [1, 2]
    result = handle.result(timeout_s=0)
    assert result.success and result.segment_count == 3
    assert "search" not in result.plan_text
    stats = setup.service.stats()  # four segments handed out, one of them taken back
    assert (stats.segments_emitted, stats.segments_withdrawn, stats.rollbacks) == (4, 1, 1)


def test_a_robot_loop_over_segments_never_gets_a_withdrawn_segment() -> None:
    """`handle.segments()`, as a robot loop reads it: segment 0 fails after segment 1
    was delivered ahead; the loop's next segment is segment 1's replacement."""
    setup = make()
    handle, log = submit(setup)
    step_until(setup, lambda: len(log) == 2)  # segment 1 delivered ahead
    segments = handle.segments(timeout_s=0)
    first = next(segments)
    assert first.text.strip() == "mf(50);"
    setup.service.segment_failed(handle.task_id, first.index, "blocked")  # rolls 1 back
    step_until(setup, lambda: len(log) == 4)  # its replacement delivered
    replacement = next(segments)
    assert (replacement.index, replacement.text.strip()) == (1, "tl(90);")
    handle.segment_done(replacement.index)
    finish(setup, handle)
    assert [s.text.strip() for s in segments] == ["say('went around');"]
    assert handle.result(timeout_s=0).success


def test_the_kv_past_the_failure_point_is_freed() -> None:
    setup = make(block_size=2)  # a block per two ids: counts follow ids closely
    handle, log = submit(setup)
    step_until(setup, lambda: len(log) == 1)
    gen = setup.service._state.generations[handle.task_id]
    end0 = gen.records[0].generated_end
    step_until(setup, lambda: generated(setup, handle) >= end0 + 4)
    state = setup.engine.generation(gen.gen_id)
    held, free = len(state.block_table), setup.engine.memory().device_blocks_free
    prompt_len, before = len(gen.prompt_ids), setup.engine.token_ids(gen.gen_id)
    dropped_ids = before[prompt_len + end0 :]

    rollback = setup.service.segment_failed(handle.task_id, 0, "blocked")

    assert rollback is not None and rollback.tokens_dropped == len(dropped_ids)
    assert setup.engine.generation(gen.gen_id).block_table == []
    pinned = setup.engine.memory().pinned_prefix_blocks
    assert setup.engine.memory().device_blocks_free == free + held - pinned
    obs_ids = make_tokenizer().encode(OBSERVATION, add_special_tokens=False).ids
    ids = setup.engine.token_ids(gen.gen_id)
    assert ids == before[: prompt_len + end0] + obs_ids
    setup.service.run_until(setup.clock.now() + 0.2)  # resumed: only the kept + appended
    state = setup.engine.generation(gen.gen_id)
    assert state.token_ids[: len(ids)] == ids
    assert len(state.block_table) == math.ceil(state.num_computed / 2)
    finish(setup, handle)
    assert handle.result(timeout_s=0).success


def test_the_recovery_cap_ends_the_task_naming_the_failure() -> None:
    setup = make(config=ServiceConfig(max_recoveries=1))
    handle, log = submit(setup)
    step_until(setup, lambda: len(log) == 1)
    assert setup.service.segment_failed(handle.task_id, 0, "blocked") is not None
    step_until(setup, lambda: len([e for e in log if isinstance(e, Segment)]) == 2)
    assert setup.service.segment_failed(handle.task_id, 1, "blocked") is None
    result = handle.result(timeout_s=0)
    assert not result.success
    assert result.error == (
        "robot drone1: segment 1 failed: blocked; gave up after 1 recoveries (max_recoveries=1)"
    )
    assert setup.service.stats().failed == 1
    with pytest.raises(TaskFinished, match="already ended"):
        setup.service.segment_failed(handle.task_id, 1, "blocked")
    with pytest.raises(TaskFinished, match="already ended"):  # any index: the task ended
        setup.service.segment_failed(handle.task_id, 7, "blocked")


def test_without_the_flag_a_failure_ends_the_task_as_before() -> None:
    setup = make()
    handle, log = submit(setup, replan=False)
    step_until(setup, lambda: len(log) == 1)
    assert setup.service.segment_failed(handle.task_id, 0, "blocked") is None
    result = handle.result(timeout_s=0)
    assert not result.success
    assert result.error == (
        "robot drone1: segment 0 failed: blocked; the request did not ask to replan on failure"
    )
    assert result.plan_text.startswith("mf(50);")
    assert setup.engine.rewrites == 0 and handle.rollbacks() == []
    memory = setup.engine.memory()  # the task's KV went with it
    assert memory.device_blocks_free == memory.device_blocks_total - memory.pinned_prefix_blocks


def test_a_failure_after_a_plain_tasks_result_says_how_to_have_it_recorded() -> None:
    """Without replan_on_failure or result_after_reports the result comes when the
    plan is decoded; a robot's failure reported after it says what to ask for."""
    setup = make()
    handle, _ = submit(setup, replan=False)
    setup.service.run_until_idle()
    assert handle.result(timeout_s=0).success
    with pytest.raises(TaskFinished, match=r"not in its result.*result_after_reports=True"):
        setup.service.segment_failed(handle.task_id, 0, "blocked")


class NoRewrite:
    """The simulated engine without `rewrite` (an engine that cannot roll back)."""

    def __init__(self, engine: SimulatedEngine) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        if name == "rewrite":
            raise AttributeError(name)
        return getattr(self._engine, name)


def test_an_engine_that_cannot_rewrite_ends_the_task_with_the_robots_error() -> None:
    setup = make()
    setup.service._state.engine = NoRewrite(setup.engine)
    handle, log = submit(setup)
    step_until(setup, lambda: len(log) == 1)
    assert setup.service.segment_failed(handle.task_id, 0, "blocked") is None
    error = handle.result(timeout_s=0).error
    assert error.startswith("robot drone1: segment 0 failed: blocked; the NoRewrite engine")


def test_bad_reports_get_clear_errors_and_disturb_no_other_task() -> None:
    setup = make()
    handle, log = submit(setup)
    other, other_log = submit(setup, robot="drone2")
    step_until(setup, lambda: len(log) == 1 and len(other_log) == 1)
    with pytest.raises(UnknownTask, match="'nope'"):
        setup.service.segment_failed("nope", 0, "blocked")
    with pytest.raises(ValueError, match="no dispatched segment 5"):
        setup.service.segment_failed(handle.task_id, 5, "blocked")
    with pytest.raises(TypeError, match="error must be a str"):
        setup.service.segment_failed(handle.task_id, 0, cast(str, 42))
    handle.segment_done(0)
    with pytest.raises(ValueError, match=r"segment\(s\) \[0\] already reported"):
        setup.service.segment_failed(handle.task_id, 0, "blocked")
    finish(setup, handle)
    finish(setup, other)
    for h, events in ((handle, log), (other, other_log)):
        assert h.result(timeout_s=0).plan_text == PLAN
        assert texts(events) == ["mf(50);", "search('cat');", "say('found');"]
    assert setup.engine.rewrites == 0


def test_a_plan_that_ended_keeps_its_result_until_the_robot_reports() -> None:
    setup = make()
    handle, log = submit(setup)
    setup.service.run_until_idle()  # the whole plan is written
    assert texts(log) == ["mf(50);", "search('cat');", "say('found');"]
    assert not handle.done()  # the robot may still fail a segment
    handle.segment_done(0)
    handle.segment_done(1)
    assert not handle.done()
    handle.segment_done(2)
    result = handle.result(timeout_s=0)
    assert result.success and result.plan_text == PLAN and setup.engine.rewrites == 0


def test_a_failure_after_the_plan_ended_replans_from_the_failed_segment() -> None:
    setup = make(block_size=2)
    handle, log = submit(setup)
    setup.service.run_until_idle()
    gen = setup.service._state.generations[handle.task_id]
    assert not gen.in_engine  # the engine freed it when the plan ended
    handle.segment_done(0)
    rollback = handle.segment_failed(1, "blocked")
    assert rollback is not None and rollback.withdrawn == (2,)
    assert rollback.observation == "search('cat'); failed: blocked"
    finish(setup, handle)
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    assert result.plan_text == "mf(50); search('cat'); tl(90); say('went around');"
    assert texts(log) == [
        "mf(50);",
        "search('cat');",
        "say('found');",
        "<rollback>",
        "tl(90);",
        "say('went around');",
    ]
    asked = [c for c in setup.planner.contexts if "failed: blocked" in c]
    assert [c[c.index("Plan:") :] for c in asked] == [
        "Plan:mf(50); search('cat');\nsearch('cat'); failed: blocked\n"
    ]
    memory = setup.engine.memory()  # nothing left held once it ended
    assert memory.device_blocks_free == memory.device_blocks_total - memory.pinned_prefix_blocks


_CALL = re.compile(r"[\s;]*([a-z_]+)\(([^();]*)\)")
_CALL_PREFIX = re.compile(r"[\s;]*([a-z_]*|[a-z_]+\([^();]*)")


class CallParser:
    """Statements end at ')', so the token ');' completes one and opens the next."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, text: str) -> list[Statement]:
        self._buffer += text
        done = []
        while (match := _CALL.match(self._buffer)) is not None:
            done.append(Statement(match.group(0).lstrip(" ;"), match.group(1), match.group(2)))
            self._buffer = self._buffer[match.end() :]
        if not _CALL_PREFIX.fullmatch(self._buffer):
            raise ValueError(f"not a call: {self._buffer[:40]!r}")
        return done

    def close(self) -> list[Statement]:
        return []


@dataclass(frozen=True)
class CallLanguage(TinyLanguage):
    robot_type: str = "calls"

    def new_parser(self) -> CallParser:  # type: ignore[override]
        return CallParser()


def test_a_token_past_the_statement_is_dropped_and_the_statement_end_kept() -> None:
    setup = make()
    setup.service.register_robot("drone1", CallLanguage())
    handle, log = submit(setup)
    step_until(setup, lambda: len(log) == 1)
    assert texts(log) == ["mf(50)"]  # the token ');' ends it, its ';' starts the next
    rollback = setup.service.segment_failed(handle.task_id, 0, "blocked")
    assert rollback is not None
    gen = setup.service._state.generations[handle.task_id]
    context = make_tokenizer().decode(setup.engine.token_ids(gen.gen_id))
    assert context.endswith("Plan:mf(50)\nmf(50) failed: blocked\n")  # ')' re-appended
    finish(setup, handle)
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    assert result.plan_text == "mf(50) tl(90); say('went around');"
    # a second failure replays the first one's re-appended text: the parser agrees
    handle2, log2 = submit(setup)
    step_until(setup, lambda: len(log2) == 1)
    assert handle2.segment_failed(0, "blocked") is not None
    step_until(setup, lambda: len([e for e in log2 if isinstance(e, Segment)]) == 2)
    assert handle2.segment_failed(1, "still blocked") is not None
    finish(setup, handle2)
    assert handle2.result(timeout_s=0).plan_text == "mf(50) tl(90) mf(50); say('again');"
