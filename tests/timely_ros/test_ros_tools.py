"""Tool plugins configured per robot (`<robot>.tools`), across processes: the
planner starts the shipped validator for the simulated arm with a map of what the
arm knows is there, and a plan naming an object the map lacks ends at that
argument, before its statement reaches the robot; the statements before it ran."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    executor_entry,
    lrtrace_goal_fields,
    sim_planner_entry,
)

TASK = 10  # "Clean the desk": hm();?lk('cup')==True{...}?lk('pen')==True{...}?lk('paper')...
VALIDATOR = {
    "name": "map-check",
    "plugin": "robot_models.tools.validator:SkillCallValidator",
    "options": {"robot_type": "arm", "map": "on table: cup, pen; places: tray, holder"},
}


@pytest.mark.ros
def test_a_configured_validator_stops_the_plan_at_an_object_off_its_map(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    robot = node_processes(executor_entry("arm1", "sim-arm", time_scale=0.05), "executors", "arm")
    config = sim_planner_entry(tmp_path)
    config["/**/timely_planner"]["ros__parameters"]["arm1"]["tools"] = [json.dumps(VALIDATOR)]
    planner = node_processes(config, "planner", "planner")
    robot.wait_for_output("robot arm1: sim-arm executor ready", 60)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(TASK)
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    assert call.done.wait(90), planner.output()[-3000:]
    result = call.final_result()
    assert call.status == GoalStatus.STATUS_ABORTED, result.error
    assert "tool 'map-check'" in result.error and "'paper' is not in the scene" in result.error
    texts = [s.text for s in call.segments]
    assert texts[0] == "hm();" and not any("paper" in t for t in texts), texts
    task_id = call.segments[0].task_id
    executed = re.findall(rf"event=segment_executed robot=arm1 task={task_id} ", robot.output())
    assert len(executed) == len(texts)  # what was sent ran; the paper was never sent
