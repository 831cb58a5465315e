"""Tool plugins in the service (simulated engine, virtual time; the plugins are real
processes): a validator ends a task at the first bad argument, naming the tool, the
call and the argument, and nothing from that statement on is delivered; a tool
that crashes ends only its task; other robots and later tasks go on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.timely_core.core_support import make_service
from timely_core.errors import UnknownRobot
from timely_core.request import TaskRequest
from timely_core.service import PlanningService

HERE = str(Path(__file__).parent)
PLANS = {
    "stack the boxes": "pick('red_box'); place('red_box', 'blue_box'); pick('cyan_box');",
    "tidy up": "pick('red_box'); place('red_box', 'green_box'); say('done');",
    "find the keys": "mf(50); search('keys'); say('found it');",
    "find the bomb": "mf(50); search('bomb'); say('found it');",
}
KNOWN = ["red_box", "blue_box", "keys"]


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[PlanningService]:
    monkeypatch.syspath_prepend(HERE)
    service, _, _ = make_service(PLANS, robots=("arm1", "arm2", "drone1"))
    yield service
    service.close_tools()


def validator(service: PlanningService, robot: str) -> None:
    info = service.register_tool(
        robot,
        {
            "name": "scene_check",
            "plugin": "tools_fault_plugins:KnownObjects",
            "options": {"known": KNOWN},
        },
    )
    assert info.validates and info.partial and "pick" in info.skills


def run(service: PlanningService, robot: str, instruction: str, task_id: str) -> tuple[str, str]:
    handle = service.submit(TaskRequest(robot_id=robot, instruction=instruction, task_id=task_id))
    service.run_until_idle()
    result = handle.result(timeout_s=0)
    return "".join(s.text for s in handle.segments()), result.error


def test_a_validator_ends_the_task_at_the_bad_argument(service: PlanningService) -> None:
    validator(service, "arm1")
    bad = service.submit(TaskRequest(robot_id="arm1", instruction="tidy up", task_id="bad"))
    good = service.submit(TaskRequest(robot_id="arm2", instruction="tidy up", task_id="good"))
    service.run_until_idle()
    error = bad.result(timeout_s=0).error
    assert error == (
        "robot arm1: tool 'scene_check' rejected argument 2 ('green_box') of call "
        "\"place('red_box', 'green_box'\" (partial): 'green_box' is not in the scene; "
        "this statement and everything after it were not sent"
    )
    assert [s.text.strip() for s in bad.segments()] == ["pick('red_box');"]
    assert good.result(timeout_s=0).success  # arm2 has no validator
    outcomes = service.tool_outcomes("bad")
    assert [o.kind for o in outcomes if o.kind == "error"][:1] == ["error"]
    assert all(o.tool == "scene_check" for o in outcomes)


def test_a_valid_plan_passes_its_validator(service: PlanningService) -> None:
    validator(service, "arm1")
    text, error = run(service, "arm1", "stack the boxes", "t1")
    assert error.startswith("robot arm1: tool 'scene_check' rejected argument 1 ('cyan_box')")
    assert text == "pick('red_box'); place('red_box', 'blue_box');"
    service.unregister_tool("arm1", "scene_check")
    text, error = run(service, "arm1", "stack the boxes", "t2")
    assert error == "" and text == PLANS["stack the boxes"]


def test_observations_and_a_crashing_tool(service: PlanningService) -> None:
    service.register_tool("drone1", {"name": "look", "plugin": "tools_fault_plugins:Look"})
    text, error = run(service, "drone1", "find the keys", "keys")
    assert error == "" and text == PLANS["find the keys"]
    # the statement waited for the observation (the tool validates)
    [outcome] = service.tool_outcomes("keys")
    assert (outcome.kind, outcome.value, outcome.call_text) == (
        "observation",
        "keys is on the table",
        "search('keys')",
    )
    text, error = run(service, "drone1", "find the bomb", "bomb")
    assert error == (
        "robot drone1: tool 'look' failed on call \"search('bomb')\": "
        "the tool's process crashed (exit code 9); "
        "this statement and everything after it were not sent"
    )
    assert text == "mf(50);"
    text, error = run(service, "drone1", "find the keys", "again")  # restarted
    assert error == "" and text == PLANS["find the keys"]
    assert [o.value for o in service.tool_outcomes("again")] == ["keys is on the table"]


@pytest.mark.parametrize("validates", [True, False])
def test_a_tool_error_says_whether_the_statement_was_held_back(validates: bool) -> None:
    """A validating tool answers before its statement is sent; any other may answer
    once the robot has it, so its error does not claim the statement was held back.
    A message over many lines is quoted on one, cut."""
    from timely_core.tools.call_stream import CallEvent
    from timely_core.tools.outcomes import error_message as _error_message
    from timely_core.tools.plugin import ToolReply

    event = CallEvent(1, "search", ("keys",), True, "search('keys')", 8)
    reply = ToolReply.error("no searching here\n" + "because\n" * 300, argument=0)
    error = _error_message("drone1", "objector", event, reply, validates)
    assert error.startswith(
        "robot drone1: tool 'objector' rejected argument 1 ('keys') of call "
        "\"search('keys')\": no searching here because because"
    ), error
    assert "\n" not in error and len(error) < 800, error
    if validates:
        assert error.endswith("...; this statement and everything after it were not sent")
    else:
        assert error.endswith("...; the plan ends here (the statement may have been sent already)")


def test_tools_need_a_registered_robot(service: PlanningService) -> None:
    with pytest.raises(UnknownRobot):
        service.register_tool("nobody", {"name": "x", "plugin": "tools_fault_plugins:Look"})
