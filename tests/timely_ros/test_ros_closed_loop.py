"""Plans that react (issue #23), across processes: a simulated drone whose first
turn fails (`fail_skills`), and a simulated-engine planner with
`replan_on_failure`. The failed segment is rolled back in the planner, the failure
appended as an observation, and the same goal goes on: the turn is retried, then
the rest of the plan runs. Nothing planned past the failure reaches the robot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    NodeProcess,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    start_drone_and_planner,
)

TASK = 8  # "A dog is chasing the drone, get away": mu(150);tc(180);mf(200);


def _start(
    node_processes: StartNodes, tmp_path: Path, replan: bool
) -> tuple[NodeProcess, NodeProcess]:
    return start_drone_and_planner(
        node_processes,
        tmp_path,
        time_scale=0.05,
        executor={"fail_skills": ["tc"]},
        replan_on_failure=replan,
    )


def _started(robot: NodeProcess, task_id: str) -> list[int]:
    found = re.findall(
        rf"event=segment_started robot=drone1 task={task_id} segment=(\d+)", robot.output()
    )
    return [int(i) for i in found]


def _executed(robot: NodeProcess, task_id: str) -> list[tuple[int, list[str]]]:
    found = re.findall(
        rf"event=segment_executed robot=drone1 task={task_id} segment=(\d+) skills=(\[.*?\])",
        robot.output(),
    )
    return [(int(i), json.loads(skills)) for i, skills in found]


@pytest.mark.ros
@pytest.mark.parametrize("replan", [True, False])
def test_a_failed_segment_is_replanned_and_the_goal_goes_on(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path, replan: bool
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    robot, planner = _start(node_processes, tmp_path, replan)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(TASK)
    assert task["plan"] == "mu(150);tc(180);mf(200);"
    call = client.send(make_goal("drone1", task["instruction"], scene=task["scene"]))
    assert call.done.wait(60), planner.output()[-3000:]
    result = call.final_result()
    task_id = call.segments[0].task_id
    if not replan:  # as before: the robot's failure ends the goal
        assert call.status == GoalStatus.STATUS_ABORTED
        assert "injected failure of tc" in result.error
        assert _started(robot, task_id) == [0, 1]
        assert "plan_rolled_back" not in planner.output()
        assert list(result.recovered_failures) == []
        return
    assert call.status == GoalStatus.STATUS_SUCCEEDED, result.error
    # the failed turn, then the plan from the failure on: the turn again, the move
    assert [s.text for s in call.segments] == ["mu(150);", "tc(180);", "tc(180);", "mf(200);"]
    assert result.plan == "mu(150);tc(180);tc(180);mf(200);"
    # the result says what the plan recovered from
    [recovered] = result.recovered_failures
    assert recovered.startswith("segment 1: ") and "injected failure of tc" in recovered
    # segment 1 failed; the plan goes on from segment 2 (an index that any segment
    # planned ahead of the failure had, withdrawn unsent)
    assert _started(robot, task_id) == [0, 1, 2, 3]
    executed = [(0, ["move_up(150)"]), (2, ["turn_cw(180)"]), (3, ["move_forward(200)"])]
    assert _executed(robot, task_id) == executed
    log = planner.output()
    assert re.search(rf"event=plan_rolled_back robot=drone1 task={task_id} segment=1 ", log)
