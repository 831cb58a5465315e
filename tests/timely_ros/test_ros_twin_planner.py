"""Two planners of one name on one ROS domain (another machine, or no journal lock):
each hears the other's heartbeat and refuses goals, saying why, until one stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    sim_planner_entry,
    start_arm_and_planner,
    wait_until,
)


def test_twin_watch_reports_another_incarnation_of_its_name_while_it_beats() -> None:
    from timely_ros.liveness import Beat
    from timely_ros.twin_planner import TWIN_SILENT_S, TwinWatch

    now = [100.0]
    watch = TwinWatch("/timely/timely_planner", "aaa", clock=lambda: now[0])
    assert not watch.beat(Beat("/timely/timely_planner", "aaa"))  # its own beat
    assert not watch.beat(Beat("/site_b/timely_planner", "bbb"))  # another name
    assert watch.why() is None
    assert watch.beat(Beat("/timely/timely_planner", "bbb"))  # a twin: reported once
    assert not watch.beat(Beat("/timely/timely_planner", "bbb"))
    why = watch.why()
    assert why is not None and "another planner named /timely/timely_planner" in why
    assert "incarnation bbb" in why
    now[0] += TWIN_SILENT_S + 0.1  # it went quiet: goals are served again
    assert watch.why() is None
    assert watch.beat(Beat("/timely/timely_planner", "bbb"))  # back: reported again


@pytest.mark.ros
def test_two_planners_of_one_name_refuse_goals_until_one_stops(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    _robot, first = start_arm_and_planner(node_processes, tmp_path, time_scale=0.05)
    second = node_processes(sim_planner_entry(tmp_path), "planner", "second")
    twin = "goals refused: another planner named /timely/timely_planner"
    for planner in (first, second):
        planner.wait_for_output(twin, 90)

    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60)
    task = lrtrace_goal_fields(9)
    goal = make_goal("arm1", task["instruction"], scene=task["scene"])
    refused = client.send(goal)
    # the client may end the call first, taking the two incarnations it hears for a
    # restart; either way the planner refused the goal and published why
    assert refused.done.wait(30) and refused.accepted is not True
    assert "is running on this ROS domain" in client.rejection_reason(refused, 10)

    second.stop()

    # once the twin's heartbeat is gone, the one left serves goals again
    def served() -> bool:
        call = client.send(goal)
        call.done.wait(60)
        return call.accepted is True and call.status == GoalStatus.STATUS_SUCCEEDED

    wait_until(served, 90, "a goal served by the planner left")
