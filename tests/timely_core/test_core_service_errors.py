"""Bad input gets a clear error naming what was wrong, and disturbs no other task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from tests.timely_core.core_support import TinyLanguage, make_service
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine
from timely_core.errors import (
    DuplicateTask,
    PromptTooLong,
    QueueFull,
    TaskFinished,
    UnknownPolicy,
    UnknownRobot,
    UnknownRobotType,
    UnknownTask,
)
from timely_core.language.plan_language import PlanStatement
from timely_core.request import MAX_INSTRUCTION_CHARS, TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.task_handle import TaskHandle

GOOD = "mf(50); tl(90); search('cat');"
PLANS = {
    "look for the cat": GOOD,
    "ramble": "say('this sentence never ends and goes on and on and on and on and on",
    "derail": "mf(50); 42 is not a statement; tl(90);",
    "nothing": "",
}


def service_with_good_task(
    **kwargs: Any,
) -> tuple[PlanningService, VirtualClock, SimulatedEngine, TaskHandle]:
    service, clock, engine = make_service(PLANS, robots=("d1", "d2"), **kwargs)
    good = service.submit(TaskRequest(robot_id="d1", instruction="look for the cat"))
    return service, clock, engine, good


def assert_good_task_unharmed(service: PlanningService, good: TaskHandle) -> None:
    service.run_until_idle()
    result = good.result(timeout_s=0)
    assert result.success, result.error
    assert "".join(s.text for s in good.segments()) == GOOD


def test_unknown_robot_id() -> None:
    service, _, _, good = service_with_good_task()
    with pytest.raises(UnknownRobot, match="'d9'"):
        service.submit(TaskRequest(robot_id="d9", instruction="look for the cat"))
    assert_good_task_unharmed(service, good)


def test_unknown_robot_type_and_bad_robot_id() -> None:
    service, _, _, good = service_with_good_task()
    with pytest.raises(UnknownRobotType, match="'boat'"):
        service.register_robot("b1", robot_type="boat")
    with pytest.raises(UnknownRobotType, match="not a PlanLanguage"):
        service.register_robot("b1", language=object())  # type: ignore[arg-type]
    with pytest.raises(UnknownRobotType, match="does not match"):
        service.register_robot("b1", language=TinyLanguage(), robot_type="arm")
    with pytest.raises(ValueError, match="invalid robot id"):
        service.register_robot("no spaces!", language=TinyLanguage())
    assert_good_task_unharmed(service, good)


def test_robot_type_from_the_service_languages() -> None:
    service, _, _, _ = service_with_good_task()
    service._languages["tiny"] = TinyLanguage()  # what `languages=` provides
    service.register_robot("t1", robot_type="tiny")
    assert service.robots()["t1"] == "tiny"


@pytest.mark.parametrize(
    ("fields", "field_name"),
    [
        ({"instruction": ""}, "instruction"),
        ({"instruction": "   "}, "instruction"),
        ({"instruction": "x" * (MAX_INSTRUCTION_CHARS + 1)}, "instruction"),
        (
            {
                "instruction": "go",
                "tuf": {"expected_response_time_s": -1, "slope": -1, "initial_utility": 1},
            },
            "expected_response_time_s",
        ),
        (
            {
                "instruction": "go",
                "tuf": {"expected_response_time_s": 1, "slope": 2, "initial_utility": 1},
            },
            "slope",
        ),
        ({"instruction": "go", "priority": 3}, "priority"),
        ({"instruction": "fly up \x1d300 cm"}, "instruction\n.*U\\+001D at position 7"),
        ({"instruction": "go", "scene": "visible: cat\x00"}, "scene\n.*U\\+0000"),
        ({"instruction": "turn \u202eleft"}, "instruction\n.*format character U\\+202E"),
        ({"instruction": "go", "scene": "\ufeffcat"}, "scene\n.*U\\+FEFF at position 0"),
        ({"instruction": "go", "task_id": "job\n7"}, "task_id\n.*'\\\\n' at position 3"),
        ({"instruction": "go", "task_id": "\u202ejob"}, "task_id\n.*U\\+202E"),
        ({"instruction": b"go"}, "instruction\n.*valid string"),
        ({"instruction": "go", "replan_on_failure": "yes"}, "replan_on_failure\n.*boolean"),
        ({"instruction": "go", "result_after_reports": 1}, "result_after_reports\n.*boolean"),
    ],
)
def test_invalid_requests_name_the_field(fields: dict[str, object], field_name: str) -> None:
    service, _, _, good = service_with_good_task()
    with pytest.raises(ValidationError, match=field_name):
        service.submit({"robot_id": "d2", **fields})
    assert_good_task_unharmed(service, good)


def test_prompt_over_the_token_limit() -> None:
    service, _, _, good = service_with_good_task(config=ServiceConfig(max_prompt_tokens=120))
    with pytest.raises(PromptTooLong, match="max_prompt_tokens=120"):
        service.submit(TaskRequest(robot_id="d2", instruction="look", scene="a cat " * 100))
    assert_good_task_unharmed(service, good)


def test_a_request_is_checked_without_being_submitted() -> None:
    service, _, _, good = service_with_good_task(config=ServiceConfig(max_prompt_tokens=120))
    submitted = service.stats().submitted
    with pytest.raises(PromptTooLong, match="max_prompt_tokens=120"):
        service.check(TaskRequest(robot_id="d2", instruction="look", scene="a cat " * 100))
    # the robot's published scene counts when the request gives none
    service.publish_scene("d2", "a cat " * 100)
    with pytest.raises(PromptTooLong, match="max_prompt_tokens=120"):
        service.check({"robot_id": "d2", "instruction": "look"})
    with pytest.raises(UnknownRobot, match="'nobody'"):
        service.check(TaskRequest(robot_id="nobody", instruction="look"))
    service.check(TaskRequest(robot_id="d2", instruction="look", scene="a cat"))
    assert service.stats().submitted == submitted  # nothing was submitted
    assert_good_task_unharmed(service, good)


def test_report_times_off_the_service_clock_are_refused_naming_them() -> None:
    service, clock, _, good = service_with_good_task()
    handle = service.submit(TaskRequest(robot_id="d2", instruction="look for the cat"))
    service.run_until(0.5)
    assert handle.segments(), "a segment to report on"
    now = clock.now()
    for bad, message in [
        (float("nan"), "finished_at_s must be a finite time"),
        (float("inf"), "finished_at_s must be a finite time"),
        (now + 1.7e9, "outside task .* time on the service clock"),  # time.time()'s
        (-1e6, "outside task .* time on the service clock"),
    ]:
        with pytest.raises(ValueError, match=message):
            handle.segment_done(0, finished_at_s=bad)
    with pytest.raises(TypeError, match="finished_at_s must be a number, got str"):
        service.segment_done(handle.task_id, 0, finished_at_s="1.0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="segment index must be an int, got str"):
        service.segment_done(handle.task_id, "0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="started_at_s must be a finite time"):
        service.segment_started(handle.task_id, 0, started_at_s=float("nan"))
    handle.segment_done(0, finished_at_s=now)  # a time on the service clock is taken
    assert_good_task_unharmed(service, good)


def test_only_the_latest_finished_tasks_are_kept() -> None:
    service, _, _ = make_service(PLANS, robots=("d1",), config=ServiceConfig(finished_tasks_kept=2))
    handles = [
        service.submit(TaskRequest(robot_id="d1", instruction="look for the cat")) for _ in range(4)
    ]
    service.run_until_idle()
    assert all(h.result(timeout_s=0).success for h in handles)  # callers keep theirs
    with pytest.raises(UnknownTask, match=repr(handles[0].task_id)):
        service.handle(handles[0].task_id)
    with pytest.raises(UnknownTask):
        handles[1].segment_done(0)  # a report that comes far too late
    assert service.handle(handles[3].task_id) is handles[3]
    handles[3].segment_done(0)  # a late report of a kept task is still taken


def test_a_policy_that_is_no_policy_is_refused() -> None:
    service, _, engine = make_service(PLANS, robots=())
    for policy in (None, 3):
        with pytest.raises(UnknownPolicy, match="policy must be a policy name or a Policy"):
            PlanningService(engine, service.tokenizer, policy=policy)  # type: ignore[arg-type]


def test_a_segment_limit_of_zero_is_refused_not_taken_as_the_default() -> None:
    service, _, _, good = service_with_good_task()
    with pytest.raises(ValueError, match="max_segment_tokens must be >= 1, got 0"):
        service.register_robot("d3", TinyLanguage(), max_segment_tokens=0)
    for limit in ("10", 10.0, True):
        with pytest.raises(TypeError, match=rf"max_segment_tokens must be an int, got {limit!r}"):
            service.register_robot("d3", TinyLanguage(), max_segment_tokens=limit)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prompt_prefix must be a str, got bytes"):
        service.register_robot("d3", TinyLanguage(), prompt_prefix=b"Skills")  # type: ignore[arg-type]
    assert_good_task_unharmed(service, good)


def test_plan_without_a_statement_within_the_segment_limit_fails_alone() -> None:
    service, _, _, good = service_with_good_task(config=ServiceConfig(max_segment_tokens=8))
    bad = service.submit(TaskRequest(robot_id="d2", instruction="ramble"))
    assert_good_task_unharmed(service, good)
    result = bad.result(timeout_s=0)
    assert not result.success
    assert "no complete statement within 8 tokens" in result.error
    assert list(bad.segments()) == []  # the robot got nothing


def test_invalid_text_after_a_valid_statement_stops_the_plan_there() -> None:
    service, _, _, good = service_with_good_task()
    bad = service.submit(TaskRequest(robot_id="d2", instruction="derail"))
    assert_good_task_unharmed(service, good)
    result = bad.result(timeout_s=0)
    assert not result.success and "invalid plan text" in result.error
    assert [s.text for s in bad.segments()] == ["mf(50);"]


def test_empty_plan_is_an_error_result() -> None:
    service, _, _, good = service_with_good_task()
    bad = service.submit(TaskRequest(robot_id="d2", instruction="nothing"))
    assert_good_task_unharmed(service, good)
    assert bad.result(timeout_s=0).error == "the model produced no executable statement"


def test_cancel_of_unknown_and_finished_tasks() -> None:
    service, _, _, good = service_with_good_task()
    with pytest.raises(UnknownTask, match="'nope'"):
        service.cancel("nope")
    assert_good_task_unharmed(service, good)
    with pytest.raises(TaskFinished, match=good.task_id):
        good.cancel()


def test_a_task_failed_by_its_caller_ends_as_failed_and_frees_its_kv() -> None:
    service, _, engine, good = service_with_good_task()
    lost = service.submit(TaskRequest(robot_id="d2", instruction="look for the cat"))
    service.run_until(0.05)  # both planning
    with pytest.raises(ValueError, match="non-empty str naming the failure"):
        lost.fail(" ")
    with pytest.raises(UnknownTask, match="'nope'"):
        service.fail("nope", "robot lost")
    lost.fail("robot d2 stopped responding")
    assert lost.result(timeout_s=0).error == "robot d2 stopped responding"
    assert_good_task_unharmed(service, good)
    stats = service.stats()
    assert (stats.failed, stats.cancelled, stats.succeeded) == (1, 0, 1)
    memory = engine.memory()
    assert memory.device_blocks_free == memory.device_blocks_total - memory.pinned_prefix_blocks
    with pytest.raises(TaskFinished, match=lost.task_id):
        lost.fail("again")


def test_queue_full_rejects_explicitly() -> None:
    service, _, _, good = service_with_good_task(config=ServiceConfig(max_queue=2))
    service.submit(TaskRequest(robot_id="d2", instruction="look for the cat"))
    with pytest.raises(QueueFull, match="max_queue=2"):
        service.submit(TaskRequest(robot_id="d2", instruction="look for the cat"))
    assert service.stats().rejected == 1
    assert_good_task_unharmed(service, good)
    service.submit(TaskRequest(robot_id="d2", instruction="look for the cat"))  # room again


def test_duplicate_task_id_and_bad_segment_index() -> None:
    service, _, _, good = service_with_good_task()
    service.submit(TaskRequest(robot_id="d2", instruction="look for the cat", task_id="t1"))
    with pytest.raises(DuplicateTask, match="'t1'"):
        service.submit(TaskRequest(robot_id="d2", instruction="look for the cat", task_id="t1"))
    with pytest.raises(ValueError, match="no dispatched segment 5"):
        good.segment_done(5)
    with pytest.raises(UnknownTask):
        service.segment_done("nope", 0)
    assert_good_task_unharmed(service, good)


def test_a_callers_id_in_the_assigned_form_never_blocks_a_request_without_one() -> None:
    service, _, _, good = service_with_good_task()
    mine = service.submit(TaskRequest(robot_id="d2", instruction="look for the cat"))
    _, incarnation, seq = mine.task_id.rsplit("-", 2)
    taken = f"task-{incarnation}-{int(seq) + 2}"  # what the request after this one gets
    service.submit(TaskRequest(robot_id="d2", instruction="look for the cat", task_id=taken))
    later = service.submit(TaskRequest(robot_id="d2", instruction="look for the cat"))
    assert later.task_id not in (taken, mine.task_id)
    assert_good_task_unharmed(service, good)


def test_unknown_policy() -> None:
    with pytest.raises(UnknownPolicy, match=r"'lifo'.*timely"):
        make_service(PLANS, policy="lifo")


def test_engine_refusing_one_generation_fails_only_that_task() -> None:
    service, _, _, good = service_with_good_task()
    bad = service.submit(TaskRequest(robot_id="d2", instruction="no scripted plan"))
    assert_good_task_unharmed(service, good)
    assert "engine refused the generation" in bad.result(timeout_s=0).error


def test_queue_bound_applies_when_a_future_task_arrives() -> None:
    service, clock, _ = make_service(PLANS, robots=("d1",), config=ServiceConfig(max_queue=2))
    at = clock.now() + 1.0
    handles = [
        service.submit_at(at, TaskRequest(robot_id="d1", instruction="look for the cat"))
        for _ in range(3)
    ]
    service.run_until_idle()
    results = [h.result(timeout_s=0) for h in handles]
    assert [r.success for r in results] == [True, True, False]
    assert "queue full at arrival (max_queue=2)" in results[2].error
    assert service.stats().rejected == 1


class ExplodingEstimates(TinyLanguage):
    def estimate_execution_s(self, statements: Sequence[PlanStatement]) -> tuple[float, float]:
        raise RuntimeError("execution-time model broke")


def test_a_failing_language_fails_only_its_task() -> None:
    service, _, _, good = service_with_good_task()
    service.register_robot("x1", ExplodingEstimates())
    bad = service.submit(TaskRequest(robot_id="x1", instruction="look for the cat"))
    assert_good_task_unharmed(service, good)
    assert "execution-time model broke" in bad.result(timeout_s=0).error


def test_default_task_ids_are_not_reused_by_a_restarted_service() -> None:
    """Robots keep per-task state by task id: a restarted planner must not hand out
    the ids of the one before it."""
    first, _, _ = make_service(PLANS)
    restarted, _, _ = make_service(PLANS)
    request = TaskRequest(robot_id="drone1", instruction="evade")
    ids = {first.submit(request).task_id, restarted.submit(request).task_id}
    ids.add(first.submit(request).task_id)
    assert len(ids) == 3


def test_constructor_arguments_that_cannot_serve_are_refused_by_name() -> None:
    service, _, engine = make_service(PLANS, robots=())
    tokenizer = service.tokenizer
    with pytest.raises(TypeError, match="engine must implement the Engine protocol"):
        PlanningService(None, tokenizer)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tokenizer must be .* has no encode"):
        PlanningService(engine, None)
    with pytest.raises(TypeError, match=r"clock must be a Clock \(with now\(\)\), got str"):
        PlanningService(engine, tokenizer, clock="mono")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config must be a ServiceConfig or a mapping"):
        PlanningService(engine, tokenizer, config=64)  # type: ignore[arg-type]


def test_a_config_mapping_is_validated_like_a_service_config() -> None:
    service, clock, engine = make_service(PLANS, robots=())
    made = PlanningService(engine, service.tokenizer, clock=clock, config={"max_tokens": 64})
    assert made.config.max_tokens == 64
    with pytest.raises(ValidationError, match="max_tokens"):
        PlanningService(engine, service.tokenizer, clock=clock, config={"max_tokens": "64"})
    with pytest.raises(ValidationError, match="max_queue"):
        PlanningService(engine, service.tokenizer, clock=clock, max_queue="10")  # type: ignore[arg-type]
    assert PlanningService(engine, service.tokenizer, max_queue=10).config.max_queue == 10


@pytest.mark.parametrize(
    "field, value",
    [
        ("idle_wait_s", float("inf")),
        ("idle_wait_s", float("nan")),
        ("segment_generation_s", float("inf")),
        ("min_slack_s", float("nan")),
        ("grammar", "yes"),
        ("max_tokens", "256"),
        ("max_queue", 10.0),
    ],
)
def test_service_config_refuses_non_finite_and_coerced_values(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        ServiceConfig.model_validate({field: value})


def test_service_config_still_takes_a_strategy_by_name() -> None:
    assert ServiceConfig(handling_strategy="swap").handling_strategy.value == "swap"  # type: ignore[arg-type]
    assert ServiceConfig(segment_generation_s=1).segment_generation_s == 1.0


@pytest.mark.parametrize("t_s", [float("nan"), float("inf"), -1e6])
def test_an_arrival_not_on_the_service_clock_is_refused(t_s: float) -> None:
    service, _, _, good = service_with_good_task()
    with pytest.raises(ValueError, match="is not a time on the service clock"):
        service.submit_at(t_s, TaskRequest(robot_id="d2", instruction="look for the cat"))
    with pytest.raises(TypeError, match="t_s must be a time on the service clock, got str"):
        service.submit_at("5", TaskRequest(robot_id="d2", instruction="look for the cat"))  # type: ignore[arg-type]
    assert_good_task_unharmed(service, good)


def test_a_wait_with_a_timeout_that_is_no_time_is_refused() -> None:
    service, _, _, good = service_with_good_task()
    for timeout in (float("nan"), -1.0):
        with pytest.raises(ValueError, match="timeout_s must be None or seconds >= 0"):
            good.result(timeout_s=timeout)
        with pytest.raises(ValueError, match="timeout_s must be None or seconds >= 0"):
            next(iter(good.segments(timeout_s=timeout)))
    with pytest.raises(TypeError, match="timeout_s must be seconds or None, got str"):
        good.result(timeout_s="1")  # type: ignore[arg-type]
    assert_good_task_unharmed(service, good)
