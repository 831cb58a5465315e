"""Two planners side by side (#26): each in its own namespace with its own robots,
action and topics; clients, `timely status` and the robots' planner watch name the
namespace they mean."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    PYTHON,
    REPO,
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    planner_checkpoint,
    ros_env,
)

pytestmark = pytest.mark.ros


def _planner(tmp_path: Path, namespace: str, robot: str) -> dict[str, object]:
    return {
        "/**/timely_planner": {
            "ros__parameters": {
                "namespace": namespace,
                "robots": [robot],
                robot: {"type": "drone", "dispatch": False},
                "engine": "simulated",
                "model_path": str(planner_checkpoint(tmp_path)),
                "kv_budget_mb": 4096.0,
                "status_period_s": 0.2,
            }
        }
    }


def test_two_planners_in_two_namespaces(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    site_a = node_processes(_planner(tmp_path, "site_a", "drone1"), "planner", "site_a")
    site_b = node_processes(_planner(tmp_path, "fleet/site_b", "drone2"), "planner", "site_b")
    a = PlanClient(ros_client.node, "site_a", planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    b = PlanClient(ros_client.node, "fleet/site_b", planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert a.wait_for_server(60), site_a.output()
    assert b.wait_for_server(60), site_b.output()
    task = lrtrace_goal_fields(1)

    def goal(robot: str) -> object:
        return make_goal(robot, task["instruction"], scene=task["scene"], dispatch=False)

    calls = [a.send(goal("drone1")), b.send(goal("drone2"))]
    for call in calls:
        assert call.done.wait(60)
        assert call.status == GoalStatus.STATUS_SUCCEEDED, call.final_result().error
        assert call.final_result().plan == task["plan"]
    assert calls[0].planner_incarnation != calls[1].planner_incarnation
    wrong = a.send(goal("drone2"))  # site_a does not serve drone2
    assert wrong.done.wait(30) and wrong.accepted is False
    assert "drone2" in a.rejection_reason(wrong)

    status = subprocess.run(
        [PYTHON, "-m", "timely_ros.cli", "--namespace", "fleet/site_b", "status", "--wait", "30"],
        cwd=REPO,
        env=ros_env(tmp_path / "ros_log"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    assert "drone2" in status.stdout and "drone1" not in status.stdout
    site_b.wait_for_output(r"planner /fleet/site_b/timely_planner up", 10)
