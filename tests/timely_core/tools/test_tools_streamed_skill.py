"""The streamed-argument skill in the service (simulated engine in virtual time,
forced plans in the planner's tokenizer, the drone language with its streamed skill,
`StreamedPath` in its own process): each leg of `fp` is handed on (`StreamedElement`)
at the token that completed it, before the call's `)`; a leg that breaks the robot's
geofence ends the task there, and no leg or statement after it is delivered."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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
from timely_core.events import Segment, StreamedElement
from timely_core.request import TaskRequest
from timely_core.service import PlanningService

RECOVERY = "fp(100,0,0,0,50,0);ld();"  # after the failure: the same first leg again
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
    assert info.streams and info.partial and info.validates and "fp" in info.skills
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
