"""Tool plugins configured per robot (`<robot>.tools`), across processes: the
planner starts the shipped validator for the simulated arm with a map of what the
arm knows is there, and a plan naming an object the map lacks ends at that
argument, before its statement reaches the robot; the statements before it ran.
The shipped perception tool's answers are appended to the plan, and the simulated
engine's known plan goes on after each."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    NodeProcess,
    RosClient,
    StartNodes,
    executor_entry,
    lrtrace_goal_fields,
    sim_planner_entry,
    timely_cli,
    wait_until,
)

TASK = 10  # "Clean the desk": hm();?lk('cup')==True{...}?lk('pen')==True{...}?lk('paper')...
PERCEPTION = {
    "name": "look",
    "plugin": "robot_models.tools.perception:ScenePerception",
    "options": {"robot_type": "arm", "validates": True},
    "append_observations": True,
}
VALIDATOR = {
    "name": "map-check",
    "plugin": "robot_models.tools.validator:SkillCallValidator",
    "options": {"robot_type": "arm", "map": "on table: cup, pen; places: tray, holder"},
}


def _start(
    node_processes: StartNodes,
    ros_client: RosClient,
    tmp_path: Path,
    tools: list[dict[str, Any]],
    **params: Any,
) -> tuple[NodeProcess, NodeProcess, Any]:
    """The simulated arm and a simulated-engine planner whose arm1 has `tools`;
    (robot, planner, a PlanClient), the client only once the planner serves when
    it starts on its own."""
    from timely_ros.plan_client import PlanClient

    robot = node_processes(executor_entry("arm1", "sim-arm", time_scale=0.05), "executors", "arm")
    config = sim_planner_entry(tmp_path, **params)
    config["/**/timely_planner"]["ros__parameters"]["arm1"]["tools"] = [
        json.dumps(t) for t in tools
    ]
    planner = node_processes(config, "planner", "planner")
    robot.wait_for_output("robot arm1: sim-arm executor ready", 60)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    if params.get("autostart", True):
        assert client.wait_for_server(60), planner.output()
    return robot, planner, client


def _clean_the_desk(client: Any, planner: NodeProcess) -> tuple[Any, Any]:
    """The goal, once ended, and its result."""
    from timely_ros.plan_client import make_goal

    task = lrtrace_goal_fields(TASK)
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    assert call.done.wait(90), planner.output()[-3000:]
    return call, call.final_result()


@pytest.mark.ros
def test_a_configured_validator_stops_the_plan_at_an_object_off_its_map(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus

    robot, planner, client = _start(node_processes, ros_client, tmp_path, [VALIDATOR])
    call, result = _clean_the_desk(client, planner)
    assert call.status == GoalStatus.STATUS_ABORTED, result.error
    assert "tool 'map-check'" in result.error and "'paper' is not in the scene" in result.error
    texts = [s.text for s in call.segments]
    assert texts[0] == "hm();" and not any("paper" in t for t in texts), texts
    task_id = call.segments[0].task_id
    executed = re.findall(rf"event=segment_executed robot=arm1 task={task_id} ", robot.output())
    assert len(executed) == len(texts)  # what was sent ran; the paper was never sent


@pytest.mark.ros
def test_a_configured_perception_tools_answers_join_the_plan_and_it_goes_on(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus

    _, planner, client = _start(node_processes, ros_client, tmp_path, [PERCEPTION])
    call, result = _clean_the_desk(client, planner)
    assert call.status == GoalStatus.STATUS_SUCCEEDED, result.error
    assert result.plan == lrtrace_goal_fields(TASK)["plan"]  # no answer reaches the plan text


@pytest.mark.ros
def test_the_planner_stops_at_once_while_a_goal_waits_on_a_hung_tool(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    """Ctrl-C while a goal waits for a validating tool that never answers (its
    wall time 60 s): the goal is cancelled and the tools stopped first, so the
    planner exits without waiting for the tool's wall time."""
    from timely_ros.plan_client import make_goal

    hung = {"name": "hung", "plugin": "tests.timely_ros.ros_tool_plugins:HungPick", "wall_s": 60}
    robot, planner, client = _start(node_processes, ros_client, tmp_path, [hung])
    task = lrtrace_goal_fields(TASK)
    client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    robot.wait_for_output(r"event=segment_executed robot=arm1 task=\S+ segment=0 ", 60)
    assert planner.proc.poll() is None
    assert planner.stop() != -signal.SIGKILL, planner.output()[-3000:]  # not killed at 15 s


@pytest.mark.ros
def test_tools_set_while_unconfigured_start_at_the_next_configure(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    """A robot's tools are started at configure: set through the parameter
    service while the planner is unconfigured, they apply at the next configure
    (no restart), here the validator with its map."""
    from action_msgs.msg import GoalStatus
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    _, planner, client = _start(node_processes, ros_client, tmp_path, [PERCEPTION], autostart=False)
    planner.wait_for_output("unconfigured \\(autostart false\\)", 60)
    service: Any = ros_client.node.create_client(
        SetParameters, "/timely/timely_planner/set_parameters"
    )
    assert service.wait_for_service(timeout_sec=30)
    value = ParameterValue(
        type=ParameterType.PARAMETER_STRING_ARRAY, string_array_value=[json.dumps(VALIDATOR)]
    )
    future: Any = service.call_async(
        SetParameters.Request(parameters=[Parameter(name="arm1.tools", value=value)])
    )
    wait_until(future.done, 30, "set_parameters")
    assert future.result().results[0].successful, future.result().results[0].reason
    for transition in ("configure", "activate"):
        done = timely_cli(tmp_path, "lifecycle", transition, timeout_s=180)
        assert done.returncode == 0, (done.stdout, done.stderr, planner.output()[-2000:])
    assert client.wait_for_server(60), planner.output()
    call, result = _clean_the_desk(client, planner)
    assert call.status == GoalStatus.STATUS_ABORTED, result.error
    assert "tool 'map-check'" in result.error and "'paper' is not in the scene" in result.error


@pytest.mark.ros
def test_a_lifecycle_shutdown_aborts_a_waiting_goal_saying_so(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    """A lifecycle shutdown while a goal waits on a hung tool: the goal is aborted
    with the planner's reason (no client cancelled it), at once."""
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import make_goal

    hung = {"name": "hung", "plugin": "tests.timely_ros.ros_tool_plugins:HungPick", "wall_s": 60}
    robot, planner, client = _start(node_processes, ros_client, tmp_path, [hung])
    task = lrtrace_goal_fields(TASK)
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    robot.wait_for_output(r"event=segment_executed robot=arm1 task=\S+ segment=0 ", 60)
    shutdown = timely_cli(tmp_path, "lifecycle", "shutdown", timeout_s=60)
    assert shutdown.returncode == 0, (shutdown.stdout, shutdown.stderr)
    assert call.done.wait(30), planner.output()[-3000:]
    assert call.status == GoalStatus.STATUS_ABORTED
    assert call.final_result().error == "planner /timely/timely_planner is shutting down"
