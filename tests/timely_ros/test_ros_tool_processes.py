"""The planner node's tool plugin processes end with the node, not with its
process: cleanup stops the ones configure started (configure starts them again),
and destroying the node (or shutting it down) stops every one it holds, a given
service's too. The planner's process (this test's) goes on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rclpy.lifecycle import TransitionCallbackReturn

from tests.timely_ros.ros_support import wait_until

pytestmark = pytest.mark.ros
SUCCESS = TransitionCallbackReturn.SUCCESS

WORKER = b"timely_core.tools.worker"


@pytest.fixture
def ros_context() -> Iterator[Any]:
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context)
    yield context
    rclpy.try_shutdown(context=context)


def _tool_processes() -> set[int]:
    """Live tool plugin processes started by this process (zombies excluded)."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # it ended while we looked
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and WORKER in cmdline:
            found.add(int(entry.name))
    return found


def _planner(context: Any, service: Any = None) -> Any:
    from rclpy.parameter import Parameter
    from timely_ros.planner_node import PlannerNode

    overrides = {
        "engine": "simulated",
        "kv_budget_mb": 512.0,
        "robots": ["drone1"],
        "drone1.type": "drone",
        "drone1.streamed_skills": True,  # configure starts its StreamedPath tool
        "drone1.dispatch": False,
    }
    return PlannerNode(
        service=service,
        parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()],
        context=context,
    )


def _gone(pids: set[int]) -> bool:
    return not pids & _tool_processes()


def test_cleanup_stops_the_tools_configure_started(ros_context: Any) -> None:
    before = _tool_processes()
    node = _planner(ros_context)
    try:
        first = _tool_processes() - before
        assert len(first) == 1, "configure starts drone1's StreamedPath process"
        assert node.trigger_deactivate() == SUCCESS
        assert first <= _tool_processes(), "deactivate keeps the model and its tools"
        assert node.trigger_cleanup() == SUCCESS
        wait_until(lambda: _gone(first), 10, "the tool process to end at cleanup")
        # the planner goes on: configure builds the service again, with a new tool
        assert node.trigger_configure() == SUCCESS
        second = _tool_processes() - before
        assert len(second) == 1 and not second & first
    finally:
        node.destroy_node()
    wait_until(lambda: _gone(second), 10, "the tool process to end with the node")
    assert _tool_processes() <= before


def test_destroying_the_node_stops_a_given_services_tools(ros_context: Any) -> None:
    from timely_ros.config import PlannerParams, RobotSpec
    from timely_ros.service_factory import build_service

    robot = RobotSpec(id="drone1", type="drone", streamed_skills=True, dispatch=False)
    before = _tool_processes()
    service = build_service(PlannerParams(engine="simulated", kv_budget_mb=512, robots=[robot]))
    started = _tool_processes() - before
    assert len(started) == 1
    node = _planner(ros_context, service)
    # cleanup keeps a given service's tools: configure serves with it again
    assert node.trigger_deactivate() == SUCCESS
    assert node.trigger_cleanup() == SUCCESS
    assert started <= _tool_processes()
    node.destroy_node()
    wait_until(lambda: _gone(started), 10, "the given service's tool to end with the node")


def test_a_failed_configure_leaves_no_tool_process() -> None:
    """drone1's tool starts, then arm1's prompt does not fit the KV budget: the
    configure fails and the tool it had started is stopped."""
    from timely_ros.config import ConfigError, PlannerParams, RobotSpec
    from timely_ros.service_factory import build_service

    robots = [
        RobotSpec(id="drone1", type="drone", streamed_skills=True, dispatch=False),
        RobotSpec(id="arm1", type="arm", dispatch=False),
    ]
    before = _tool_processes()
    with pytest.raises(ConfigError, match="is too small: robot 'arm1'"):
        build_service(PlannerParams(engine="simulated", kv_budget_mb=256, robots=robots))
    assert _tool_processes() <= before
