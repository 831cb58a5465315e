"""A goal that waits for its robot to end another goal: the planner decodes its
plan at once, but the robot gets its first segment only when its turn comes, its
client gets it (feedback) then too, and the goal's result says so (response and
waiting time from arrival to the robot's real start, utility on that), not the time
its plan was decoded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    start_arm_and_planner,
)


def test_a_goal_waiting_for_its_robots_turn_reports_the_wait(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from timely_ros.plan_client import PlanClient, make_goal

    _, planner = start_arm_and_planner(node_processes, tmp_path, time_scale=0.1)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(10)
    calls = [
        client.send(make_goal("arm1", task["instruction"], scene=task["scene"])) for _ in range(2)
    ]
    results = []
    for call in calls:
        assert call.done.wait(120), planner.output()
        results.append(call.final_result())
    assert all(r.success for r in results), [r.error for r in results]
    first, second = sorted(results, key=lambda r: r.response_time_s)
    # the second started once the first's whole plan had run on the arm
    assert second.response_time_s > first.response_time_s + 1.0, (first, second)
    assert second.waiting_time_s >= second.response_time_s
    assert second.utility < first.utility
    # streamed as it went to the arm: after every segment of the goal before it
    assert _seconds(second.segments[0].stamp) > _seconds(first.segments[-1].stamp)


def _seconds(stamp: Any) -> float:
    return float(stamp.sec) + stamp.nanosec * 1e-9
