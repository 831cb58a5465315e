"""LAMPS's call-waiting policies (lamps, infercept, vllm-like) serve ROS goals: each
segment is a call the generation waits on until the robot reports it done, then
the plan goes on; the plan is the data set's, in order, on the robot."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    start_drone_and_planner,
    wait_until,
)

TASK = 8  # drone, urgent: mu(150);tc(180);mf(200); three segments


@pytest.mark.ros
@pytest.mark.parametrize("policy", ["lamps", "infercept", "vllm-like"])
def test_a_call_waiting_policy_serves_a_plan_segment_by_segment(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path, policy: str
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    robot, planner = start_drone_and_planner(
        node_processes, tmp_path, time_scale=0.05, policy=policy
    )
    planner.wait_for_output(f"policy {policy}", 60)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(TASK)
    call = client.send(
        make_goal("drone1", task["instruction"], urgency=task["urgency"], scene=task["scene"])
    )
    assert call.done.wait(60), planner.output()[-3000:]
    result = call.final_result()
    assert call.status == GoalStatus.STATUS_SUCCEEDED, result.error
    assert result.plan == task["plan"]
    assert [s.index for s in call.segments] == [0, 1, 2]

    def executed() -> int:
        return robot.output().count("event=segment_executed robot=drone1")

    wait_until(lambda: executed() >= 3, 10, "the robot's log")
    assert executed() == 3, robot.output()[-2000:]
