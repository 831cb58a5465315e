"""The streamed-argument skill in the service (simulated engine in virtual time,
forced plans in the planner's tokenizer, the drone language with its streamed skill,
`StreamedPath` in its own process): each leg of `fp` is handed on (`StreamedElement`)
at the token that completed it, before the call's `)`; a leg that breaks the robot's
geofence ends the task there, and no leg or statement after it is delivered."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.language import load_language
from robot_models.limit_checker import checker_factory
from robot_models.safety_limits import SafetyLimits
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.errors import TaskFinished, UnknownTask
from timely_core.events import Segment, StreamedElement
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.task_handle import TaskHandle

RECOVERY = "fp(100,0,0,0,50,0);ld();"  # after the failure: the same first leg again
LEG_RECOVERY = "fp(0,-50,0,50,0,0);ld();"  # after a failed leg: around the obstacle
PLANS = {
    "survey": "tk();fp(100,0,50,0,100,0,-100,0,0);ld();",
    "escape": "tk();fp(100,0,0,0,300,0,100,0,0);ld();",  # leg 2 leaves the geofence
    "loop": "tk();2{fp(50,0,0);}ld();",  # inside a block: sent whole, never streamed
    "climb": "tk();fp(100,0,0,0,100,0,50,0,0);ld();",  # tk() fails while fp is decoded
    "direct": "fp(100,0,50,0,100,0);ld();",  # the first action is a streamed leg
}
LIMITS: dict[str, Any] = {
    "geofence_cm": {"x_min": -200, "x_max": 300, "y_min": -200, "y_max": 200, "z_min": 0,
                    "z_max": 250},
}  # fmt: skip


def _tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(default_planner_path() / "tokenizer.json"))


def _script(tokenizer: Tokenizer) -> Any:
    def script(prompt_ids: Sequence[int]) -> list[int]:
        prompt = tokenizer.decode(list(prompt_ids))
        if prompt.endswith("->failed('blocked')\n"):
            return list(tokenizer.encode(RECOVERY, add_special_tokens=False).ids)
        if prompt.endswith(": blocked')\n"):  # an element's failure
            return list(tokenizer.encode(LEG_RECOVERY, add_special_tokens=False).ids)
        task = next(t for t in PLANS if f"Task: {t}\n" in prompt)
        return list(tokenizer.encode(PLANS[task], add_special_tokens=False).ids)

    return script


def _service(policy: str = "timely", partial_calls: bool = True) -> PlanningService:
    tokenizer = _tokenizer()
    eos = tokenizer.token_to_id("<eos>")
    assert eos is not None
    engine = SimulatedEngine(
        VirtualClock(),
        PAPER_LLAMA3_8B_RTX4090,
        _script(tokenizer),
        SimulatedEngineConfig(eos_token_id=eos),
    )
    service = PlanningService(engine, tokenizer, policy=policy, clock=engine.clock)
    language = load_language("drone", streamed_skills=True)
    limits = SafetyLimits.model_validate(LIMITS)
    service.register_robot("drone1", language, guard=checker_factory(limits, language.skill_set))
    service.register_robot("drone2", language)  # no tool: fp runs as a whole statement
    info = service.register_tool(
        "drone1",
        {
            "name": "path",
            "plugin": "robot_models.tools.path_stream:StreamedPath",
            "options": {"robot_type": "drone", "limits": LIMITS},
            "partial_calls": partial_calls,
        },
    )
    assert info.streams and info.validates and "fp" in info.skills
    assert info.partial == partial_calls  # what the tool gets, not what it could take
    return service


@pytest.fixture
def service() -> Iterator[PlanningService]:
    service = _service()
    yield service
    service.close_tools()


def _run(service: PlanningService, task: str, robot: str = "drone1") -> tuple[list[object], str]:
    """The task's deliveries in order (segments and elements) and its error."""
    events: list[object] = []
    handle = service.submit(TaskRequest(robot_id=robot, instruction=task, task_id=task + robot))
    handle.on_segment(events.append)
    handle.on_element(events.append)
    service.run_until_idle()
    return events, handle.result(timeout_s=0).error


def test_each_leg_goes_to_the_robot_before_the_call_is_decoded(service: PlanningService) -> None:
    events, error = _run(service, "survey")
    assert error == ""
    kinds = [
        e.text if isinstance(e, Segment) else f"leg {e.element}: {e.text}"  # type: ignore[attr-defined]
        for e in events
    ]
    assert kinds == [
        "tk();",
        "leg 0: fp(100,0,50)",
        "leg 1: fp(0,100,0)",
        "leg 2: fp(-100,0,0)",
        "fp(100,0,50,0,100,0,-100,0,0);",
        "ld();",
    ]
    legs = [e for e in events if isinstance(e, StreamedElement)]
    segments = [e for e in events if isinstance(e, Segment)]
    # the first two legs were accepted with the call still open, decoded as far as
    # their last number and the comma after it (the third at the call's ')')
    assert [leg.call_text for leg in legs[:2]] == ["fp(100,0,50,", "fp(100,0,50,0,100,0,"]
    assert legs[2].call_text.endswith(")")
    assert all(leg.index == 1 for leg in legs)  # the segment that holds the call
    assert legs[0].emitted_at_s < legs[1].emitted_at_s < segments[1].emitted_at_s
    assert segments[1].streamed_elements == 3
    assert segments[0].streamed_elements == segments[2].streamed_elements == 0


def test_a_streamed_segment_starts_with_its_first_leg(service: PlanningService) -> None:
    """The response time (and the wait of a streamed segment) counts to the first
    leg, which the robot runs before the call's segment is cut."""
    arrival = service.clock.now()
    handle = service.submit(TaskRequest(robot_id="drone1", instruction="direct", task_id="d"))
    events: list[object] = []
    handle.on_segment(events.append)
    handle.on_element(events.append)
    service.run_until_idle()
    result = handle.result(timeout_s=0)
    assert result.error == ""
    first_leg, path = events[0], events[2]
    assert isinstance(first_leg, StreamedElement) and isinstance(path, Segment)
    assert path.streamed_elements == 2 and first_leg.emitted_at_s < path.emitted_at_s
    latency = service.config.dispatch_latency_s
    assert result.response_time_s == pytest.approx(first_leg.emitted_at_s + latency - arrival)


def test_a_leg_outside_the_geofence_ends_the_task_there(service: PlanningService) -> None:
    events, error = _run(service, "escape")
    assert error == (
        "robot drone1: tool 'path' rejected argument 4 (0) of call 'fp(100,0,0,0,300,0,' "
        "(partial): safety limit geofence_cm.y_max: fp(100,0,0,0,300,0) leg 2 (0,300,0): "
        "y would reach 300 cm, beyond 200 cm in statement 'fp(100,0,0,0,300,0)'; "
        "this statement and everything after it were not sent"
    )
    # the first leg had gone; nothing after the bad one: no leg, no statement
    assert [getattr(e, "text", None) for e in events] == ["tk();", "fp(100,0,0)"]
    assert isinstance(events[1], StreamedElement)


def test_a_call_inside_a_block_is_sent_whole(service: PlanningService) -> None:
    events, error = _run(service, "loop")
    assert error == ""
    assert all(isinstance(e, Segment) for e in events)
    assert [e.text for e in events] == ["tk();", "2{fp(50,0,0);}", "ld();"]  # type: ignore[attr-defined]


def test_without_the_tool_the_statement_is_one_segment(service: PlanningService) -> None:
    events, error = _run(service, "survey", robot="drone2")
    assert error == ""
    assert [e.text for e in events] == [  # type: ignore[attr-defined]
        "tk();",
        "fp(100,0,50,0,100,0,-100,0,0);",
        "ld();",
    ]


@pytest.mark.parametrize(("policy", "partial_calls"), [("fcfs", True), ("timely", False)])
def test_baselines_send_no_leg_early(policy: str, partial_calls: bool) -> None:
    """A whole-plan policy sends the plan whole (no element); complete calls only
    (`partial_calls` False) hands every leg over at the call's ')'."""
    service = _service(policy, partial_calls)
    try:
        events, error = _run(service, "survey")
    finally:
        service.close_tools()
    assert error == ""
    legs = [e for e in events if isinstance(e, StreamedElement)]
    if policy == "fcfs":
        assert legs == [] and [e.text for e in events] == [PLANS["survey"]]  # type: ignore[attr-defined]
    else:
        assert [leg.text for leg in legs] == ["fp(100,0,50)", "fp(0,100,0)", "fp(-100,0,0)"]
        assert all(leg.call_text.endswith(")") for leg in legs)


def test_after_a_rollback_the_new_path_streams_from_its_first_leg(
    service: PlanningService,
) -> None:
    """tk() fails while the path after it is decoded (one leg already handed on):
    the plan rolls back to tk()'s end; the recovery's path, at the same call index
    and with the same first leg, streams again from leg 0, and its segment counts
    only its own legs."""
    events: list[object] = []
    handle = service.submit(
        TaskRequest(robot_id="drone1", instruction="climb", task_id="climb", replan_on_failure=True)
    )
    handle.on_segment(events.append)
    handle.on_element(events.append)
    handle.on_rollback(events.append)
    while not any(isinstance(e, StreamedElement) for e in events):
        service.run_until(service.clock.now() + 0.002)
    rollback = service.segment_failed("climb", 0, "blocked")
    assert rollback is not None and rollback.withdrawn == ()
    while not handle.done():
        service.run_until_idle()
        for segment in [e for e in events if isinstance(e, Segment)]:
            if not handle.done():
                handle.segment_done(segment.index)
    assert handle.result(timeout_s=0).success, handle.result(timeout_s=0).error
    seen = [
        type(e).__name__ + ":" + getattr(e, "text", "") + f"@{getattr(e, 'element', '')}"
        for e in events
    ]
    assert seen == [
        "Segment:tk();@",
        "StreamedElement:fp(100,0,0)@0",  # of the path the rollback dropped
        "Rollback:@",
        "StreamedElement:fp(100,0,0)@0",  # the recovery's path, from its first leg
        "StreamedElement:fp(0,50,0)@1",
        "Segment:fp(100,0,0,0,50,0);@",
        "Segment:ld();@",
    ]
    assert [e.streamed_elements for e in events if isinstance(e, Segment)] == [0, 2, 0]


def _labels(events: list[object]) -> list[str]:
    return [
        type(e).__name__ + ":" + getattr(e, "text", "") + f"@{getattr(e, 'element', '')}"
        for e in events
    ]


def _submit(
    service: PlanningService, task: str, replan: bool = True
) -> tuple[TaskHandle, list[object]]:
    """A drone1 task whose segments, elements and rollbacks land in one list."""
    events: list[object] = []
    handle = service.submit(
        TaskRequest(robot_id="drone1", instruction=task, task_id=task, replan_on_failure=replan)
    )
    handle.on_segment(events.append)
    handle.on_element(events.append)
    handle.on_rollback(events.append)
    return handle, events


def _until(service: PlanningService, events: list[object], seen: Callable[[], bool]) -> None:
    """Step in small virtual-time slices until `seen()` (the task is still decoded)."""
    while not seen():
        service.run_until(service.clock.now() + 0.002)


def _finish(service: PlanningService, handle: TaskHandle, events: list[object]) -> None:
    """Run to the end, the robot reporting every segment done."""
    while not handle.done():
        service.run_until_idle()
        for segment in [e for e in events if isinstance(e, Segment)]:
            if not handle.done():
                with contextlib.suppress(ValueError):  # reported, or withdrawn
                    handle.segment_done(segment.index)


# "survey" when its first leg failed while the path was decoded
FIRST_LEG_REPLANNED = [
    "Segment:tk();@",
    "StreamedElement:fp(100,0,50)@0",
    "Segment:fp(100,0,50,0,100,0,-100,0,0);@",  # legs 1 and 2 were not handed on
    "Rollback:@",
    "StreamedElement:fp(0,-50,0)@0",
    "StreamedElement:fp(50,0,0)@1",
    "Segment:fp(0,-50,0,50,0,0);@",
    "Segment:ld();@",
]


def test_a_leg_that_fails_while_the_path_is_decoded_is_replanned(
    service: PlanningService,
) -> None:
    """The first leg fails while the path is still decoded: the path's later legs
    are never handed on, its segment is delivered at its cut and the plan rolls
    back to its end at once, with the failure (naming the leg) as an observation;
    the plan goes on from there and nothing planned past the failure went out."""
    handle, events = _submit(service, "survey")
    _until(service, events, lambda: any(isinstance(e, StreamedElement) for e in events))
    # tk() not reported done: by the estimates the drone is still busy with it, yet
    # the failed path's segment is not held for one more token (nothing past it)
    with pytest.raises(ValueError, match="segment 1 has no element 1 handed on \\(1 were\\)"):
        handle.segment_failed(1, "blocked", element=1)  # not sent yet
    assert handle.segment_failed(1, "blocked", element=0) is None  # its segment is not cut
    _finish(service, handle, events)
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    assert _labels(events) == FIRST_LEG_REPLANNED
    segments = [e for e in events if isinstance(e, Segment)]
    assert [s.streamed_elements for s in segments] == [0, 1, 2, 0]
    assert [s.index for s in segments] == [0, 1, 2, 3]
    (rollback,) = handle.rollbacks()
    assert rollback.failed_index == 1 and rollback.withdrawn == ()
    assert rollback.observation == "fp(100,0,50,0,100,0,-100,0,0);->failed('element 1: blocked')"
    assert rollback.tokens_dropped == 0
    assert result.plan_text == "tk();fp(100,0,50,0,100,0,-100,0,0);fp(0,-50,0,50,0,0);ld();"
    assert service.stats().failed == 0


def test_a_leg_that_fails_after_the_path_was_cut_is_replanned(service: PlanningService) -> None:
    """The last leg fails after the path's segment was delivered: the rollback is
    at once (returned), and whatever was planned past the path is withdrawn."""
    handle, events = _submit(service, "survey")
    _until(service, events, lambda: any(getattr(e, "index", 0) == 2 for e in events))
    handle.segment_done(0)
    rollback = handle.segment_failed(1, "blocked", element=2)
    assert rollback is not None and rollback.failed_index == 1
    assert rollback.withdrawn == (2,)  # ld() had gone out: the robot must not run it
    assert rollback.observation.endswith("->failed('element 3: blocked')")
    _finish(service, handle, events)
    assert handle.result(timeout_s=0).success
    assert _labels(events)[-4:] == [
        "StreamedElement:fp(0,-50,0)@0",
        "StreamedElement:fp(50,0,0)@1",
        "Segment:fp(0,-50,0,50,0,0);@",
        "Segment:ld();@",
    ]


def test_without_replanning_a_failed_leg_ends_the_task_naming_it(
    service: PlanningService,
) -> None:
    handle, events = _submit(service, "survey", replan=False)
    _until(service, events, lambda: any(isinstance(e, StreamedElement) for e in events))
    assert handle.segment_failed(1, "blocked", element=0) is None
    service.run_until_idle()
    assert handle.result(timeout_s=0).error == (
        "robot drone1: segment 1 failed: element 1: blocked; "
        "the request did not ask to replan on failure"
    )
    assert _labels(events) == ["Segment:tk();@", "StreamedElement:fp(100,0,50)@0"]
    with pytest.raises(TaskFinished):
        handle.segment_failed(1, "blocked", element=0)
    with pytest.raises(UnknownTask):
        service.segment_failed("nobody", 1, "blocked", element=0)


def test_a_leg_that_fails_while_its_segment_waits_for_one_more_token(
    service: PlanningService,
) -> None:
    """The path's segment was cut with its last leg but is held for one more token
    (tk() still runs, by the estimates): the failure waits for that token, then
    the segment is delivered and rolled back to, the held token dropped."""
    handle, events = _submit(service, "survey")
    _until(service, events, lambda: sum(isinstance(e, StreamedElement) for e in events) == 3)
    assert [e for e in events if isinstance(e, Segment)][-1].text == "tk();"  # path held
    with pytest.raises(ValueError, match="no element 3 handed on \\(3 were\\)"):
        handle.segment_failed(1, "blocked", element=3)
    assert handle.segment_failed(1, "blocked", element=1) is None
    _finish(service, handle, events)
    assert handle.result(timeout_s=0).success
    (rollback,) = handle.rollbacks()
    assert rollback.failed_index == 1 and rollback.withdrawn == ()
    assert rollback.tokens_dropped == 1  # the token the segment was held for
    assert _labels(events)[3:6] == [
        "StreamedElement:fp(-100,0,0)@2",
        "Segment:fp(100,0,50,0,100,0,-100,0,0);@",
        "Rollback:@",
    ]


@pytest.fixture
def plugin_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[PlanningService]:
    """The service, with this folder's test plugins importable by its tools."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    service = _service()
    yield service
    service.close_tools()


def _gated(service: PlanningService, tmp_path: Path, spec: dict[str, Any]) -> TaskHandle:
    """Register drone1's tool `spec`, which answers only once a gate file exists,
    and submit drone2's survey, whose last segment opens the gate; drone2's handle."""
    gate = tmp_path / "answer"
    options = {**spec["options"], "gate": str(gate)}
    service.register_tool("drone1", {**spec, "options": options, "wall_s": 5.0})
    other = service.submit(TaskRequest(robot_id="drone2", instruction="survey"))
    other.on_segment(lambda s: gate.touch() if s.text == "ld();" else None)
    return other


def _after(other: TaskHandle, events: list[object]) -> None:
    """drone2's plan succeeded, and every one of `events` came after its last segment."""
    assert other.result(timeout_s=0).success
    emitted = [s.emitted_at_s for s in other.segments()][-1]
    delivered = [e for e in events if isinstance(e, Segment | StreamedElement)]
    assert all(e.emitted_at_s >= emitted for e in delivered)


def test_a_streaming_tool_slow_to_answer_holds_only_its_own_plan(
    plugin_service: PlanningService, tmp_path: Path
) -> None:
    """drone1's streaming tool answers its first leg only once drone2's plan is all
    out: drone2 is decoded meanwhile (a wait in the service loop would stall it past
    the tool's wall time and fail drone1's task), then drone1's legs go out in order."""
    service = plugin_service
    service.unregister_tool("drone1", "path")
    path = {"robot_type": "drone", "limits": LIMITS}
    other = _gated(
        service,
        tmp_path,
        {"name": "path", "plugin": "tools_timed_plugins:GatedPath", "options": path},
    )
    events, error = _run(service, "survey")
    assert error == ""
    legs = [e.text for e in events if isinstance(e, StreamedElement)]
    assert legs == ["fp(100,0,50)", "fp(0,100,0)", "fp(-100,0,0)"], events
    _after(other, [e for e in events if isinstance(e, StreamedElement)])


def _check(skill: str) -> dict[str, Any]:
    """A validator of drone1's `skill` calls that answers when its gate opens."""
    return {
        "name": "check",
        "plugin": "tools_timed_plugins:GatedCheck",
        "options": {"skills": [skill]},
    }


def test_a_streaming_robots_slow_validator_holds_only_its_own_plan(
    plugin_service: PlanningService, tmp_path: Path
) -> None:
    """drone1 streams its path and has a validator of `tk` that answers only once
    drone2's plan is all out: drone1 waits for that verdict out of the batch,
    suspended, as a robot without a streaming tool does, so drone2 is decoded
    meanwhile (a wait in the service loop would stall it past the validator's wall
    time and fail drone1's task); then drone1's plan goes on, its legs in order."""
    service = plugin_service
    other = _gated(service, tmp_path, _check("tk"))
    events, error = _run(service, "survey")
    assert error == ""
    assert _labels(events) == [
        "Segment:tk();@",
        "StreamedElement:fp(100,0,50)@0",
        "StreamedElement:fp(0,100,0)@1",
        "StreamedElement:fp(-100,0,0)@2",
        "Segment:fp(100,0,50,0,100,0,-100,0,0);@",
        "Segment:ld();@",
    ]
    _after(other, events)  # held till then


def test_a_leg_that_fails_while_its_paths_verdict_is_out_is_replanned_once_it_comes(
    plugin_service: PlanningService, tmp_path: Path
) -> None:
    """drone1's first leg fails while the path is decoded (the failure is held for
    the path's cut), and a validator of `fp` answers only once drone2's plan is
    all out, so at the cut drone1 waits suspended for that verdict. When it comes,
    the path's segment is delivered and rolled back to at once, as without the
    wait; nothing planned past the failure goes out."""
    service = plugin_service
    other = _gated(service, tmp_path, _check("fp"))
    handle, events = _submit(service, "survey")
    _until(service, events, lambda: any(isinstance(e, StreamedElement) for e in events))
    assert not (tmp_path / "answer").exists()
    assert handle.segment_failed(1, "blocked", element=0) is None  # held for the cut
    _finish(service, handle, events)
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    assert _labels(events) == FIRST_LEG_REPLANNED  # as without the wait
    (rollback,) = handle.rollbacks()
    assert rollback.failed_index == 1 and rollback.withdrawn == ()
    path = [e for e in events if isinstance(e, Segment)][1]
    _after(other, [path])  # delivered once the verdict came
