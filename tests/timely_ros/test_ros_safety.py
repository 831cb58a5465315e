"""Safety limits before dispatch (issue #21), across processes: the planner with a
drone's limits, a simulated drone, and `timely approve` as an operator would run it.

The plan is LRTrace task 8's, `mu(150);tc(180);mf(200);`: after the half turn the
drone faces backward, so 200 cm forward leaves a fence that ends 100 cm behind the
start."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.timely_ros.ros_support import (
    CLI_WAIT_S,
    PYTHON,
    REPO,
    TEST_PLANNER_TIMEOUT_S,
    NodeProcess,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    ros_env,
    start_drone_and_planner,
    timely_cli,
    wait_until,
)

TASK = 8  # "A dog is chasing the drone, get away"
FENCE = {"x_min": -100, "x_max": 300, "y_min": -200, "y_max": 200, "z_min": 0, "z_max": 250}


def _start(
    node_processes: StartNodes, tmp_path: Path, limits: dict[str, Any], **params: Any
) -> tuple[NodeProcess, NodeProcess]:
    return start_drone_and_planner(
        node_processes, tmp_path, time_scale=0.05, limits=limits, **params
    )


def _executed(robot: NodeProcess, task_id: str) -> list[int]:
    found = re.findall(
        rf"event=segment_executed robot=drone1 task={task_id} segment=(\d+)", robot.output()
    )
    return [int(i) for i in found]


@pytest.mark.ros
def test_a_plan_leaving_the_geofence_stops_before_the_move(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    robot, planner = _start(node_processes, tmp_path, {"geofence_cm": FENCE})
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(TASK)
    assert task["plan"] == "mu(150);tc(180);mf(200);"
    call = client.send(make_goal("drone1", task["instruction"], scene=task["scene"]))
    assert call.done.wait(90), planner.output()[-3000:]
    result = call.final_result()
    assert call.status == GoalStatus.STATUS_ABORTED, result.error
    assert "robot drone1" in result.error and "geofence_cm.x_min" in result.error
    assert "mf(200);" in result.error and "-200" in result.error
    assert [s.text for s in call.segments] == ["mu(150);", "tc(180);"]
    task_id = call.segments[0].task_id
    assert _executed(robot, task_id) == [0, 1]  # the safe statements ran, the move never
    assert "segment=2" not in robot.output()


@pytest.mark.ros
def test_an_operator_approves_one_segment_and_denies_another(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    robot, planner = _start(
        node_processes, tmp_path, {"approval_skills": ["tc"]}, approval_timeout_s=60.0
    )
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(TASK)

    approved = client.send(make_goal("drone1", task["instruction"], scene=task["scene"]))
    planner.wait_for_output(r"event=approval_requested request=\w+ robot=drone1", 60)
    listing = timely_cli(tmp_path, "approve", "--list")
    assert listing.returncode == 0, listing.stderr
    assert "drone1" in listing.stdout and "tc(180);" in listing.stdout, listing.stdout
    task_id = approved.segments[0].task_id
    wait_until(lambda: _executed(robot, task_id) == [0], 10, "the first segment")
    request_id = listing.stdout.split()[0]  # approved by enough of its id, any case
    answer = timely_cli(tmp_path, "approve", request_id[:6].upper())
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert answer.stdout.startswith(f"approved {request_id} "), answer.stdout
    assert approved.done.wait(60), planner.output()[-3000:]
    assert approved.status == GoalStatus.STATUS_SUCCEEDED, approved.final_result().error
    wait_until(lambda: _executed(robot, task_id) == [0, 1, 2], 10, "all three segments run")

    # the second goal from `timely plan`, which says what it waits for
    plan = subprocess.Popen(
        [PYTHON, "-m", "timely_ros.cli", "plan", "--robot", "drone1", "--wait", CLI_WAIT_S,
         "--scene", task["scene"], task["instruction"]],
        cwd=REPO, env=ros_env(tmp_path / "ros_log"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until(
            lambda: planner.output().count("event=approval_requested") == 2, 60, "a second request"
        )
        answer = timely_cli(
            tmp_path, "approve", "--deny", "--reason", "dog is friendly", "--robot", "drone1"
        )
        assert answer.returncode == 0, answer.stdout + answer.stderr
        out, err = plan.communicate(timeout=60)
    finally:
        if plan.poll() is None:
            plan.kill()
    assert plan.returncode == 1, out + err
    notice = re.search(
        r"timely plan: segment 1 \('tc\(180\);'\) waits for an operator's approval: "
        r"timely approve (\w+) \(or --deny\)",
        err,
    )
    assert notice is not None, err
    assert f"event=approval_denied request={notice.group(1)} " in planner.output()
    assert "failed: " in err and "denied by the operator (dog is friendly)" in err, err
    assert "tc(180);" in err.splitlines()[-1]
    second = re.findall(r"event=segment_executed robot=drone1 task=(\S+) ", robot.output())[-1]
    wait_until(lambda: _executed(robot, second) == [0], 10, "the first segment")
    assert _executed(robot, second) == [0]  # never got the denied segment
    assert f"task={second} segment=1" not in robot.output()
    nothing = timely_cli(tmp_path, "approve", "--robot", "drone1")
    assert nothing.returncode == 1 and "nothing waits" in nothing.stderr
    stranger = timely_cli(tmp_path, "approve", "--robot", "drone9")
    assert stranger.returncode == 2, stranger.stdout + stranger.stderr
    assert "robot 'drone9' is not served by this planner (robots: drone1)" in stranger.stderr
