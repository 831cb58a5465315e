"""Liveness both ways, multi-process (issue #26, defects 3 and 4): a frozen robot
(SIGSTOP) is given up within the planner's robot_timeout_s, its goal ends saying
so, goals for it are rejected until it is back, and once back it is told to stop
the segment of the ended task; a planner killed (kill -9) or restarted ends its
clients' goals with a clear client-side error instead of a wait for ever, and
the robots stop the segments they were running for it. Bounds asserted are the
configured ones plus generous slack for a loaded 2-core machine."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    NodeProcess,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    sim_planner_entry,
    start_arm_and_planner,
    wait_until,
)

pytestmark = pytest.mark.ros

ARM_TASK = 10  # desk cleaning: 8 segments; the first (home) takes 1.6-2.3 modelled s
SLOW = 3.0  # wall seconds per modelled second: a segment outlasts every bound here


def _planner(tmp_path: Path, **params: Any) -> dict[str, Any]:
    return sim_planner_entry(tmp_path, status_period_s=0.2, **params)


def _start(node_processes: StartNodes, tmp_path: Path, **params: Any) -> tuple[Any, Any]:
    """The robot keeps the fleet's default heartbeat bound (2 s), which these tests
    are about: a killed planner is noticed while a segment still runs."""
    return start_arm_and_planner(
        node_processes,
        tmp_path,
        time_scale=SLOW,
        status_period_s=0.2,
        robot_params={"planner_timeout_s": 2.0},
        **params,
    )


def _resume(proc: NodeProcess) -> None:
    if proc.proc.poll() is None:
        os.kill(proc.proc.pid, signal.SIGCONT)


def test_a_frozen_robot_is_given_up_rejected_and_stopped_when_back(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from timely_interfaces.msg import ServiceStatus
    from timely_ros.plan_client import PlanClient, make_goal
    from timely_ros.qos import TOPIC

    robot, planner = _start(node_processes, tmp_path, robot_timeout_s=1.0)
    statuses: list[ServiceStatus] = []
    ros_client.node.create_subscription(ServiceStatus, "/timely/status", statuses.append, TOPIC)
    diagnostics: list[DiagnosticArray] = []
    ros_client.node.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, TOPIC)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(ARM_TASK)
    goal = make_goal("arm1", task["instruction"], scene=task["scene"])
    call = client.send(goal)
    wait_until(lambda: len(call.segments) >= 1, 60, "the first segment")
    robot.wait_for_output(r"event=segment_started robot=arm1", 30)
    task_id = call.segments[0].task_id
    os.kill(robot.proc.pid, signal.SIGSTOP)
    try:
        assert call.done.wait(20), planner.output()[-3000:]
        result = call.final_result()
        assert call.status == GoalStatus.STATUS_ABORTED
        assert "robot arm1 stopped responding during segment" in result.error, result.error
        assert "aborted segment" not in result.error  # the robot did not abort it
        wait_until(
            lambda: bool(statuses) and list(statuses[-1].robots_not_responding) == ["arm1"],
            10,
            "arm1 reported not responding",
        )
        wait_until(
            lambda: any(
                s.hardware_id == "arm1" and s.level == DiagnosticStatus.ERROR
                for s in diagnostics[-1].status
            ),
            10,
            "an ERROR diagnostic for arm1",
        )
        # a goal for the silent robot is rejected at goal time, naming why
        refused = client.send(goal)
        assert refused.done.wait(30) and refused.accepted is False
        assert "robot arm1 is not responding" in client.rejection_reason(refused)
    finally:
        _resume(robot)
    # back: told to stop the segment of the task that ended, which never completes
    planner.wait_for_output(r"robot arm1 is back; told it to stop 1 segment", 30)
    robot.wait_for_output(rf"event=cancel_received robot=arm1 task={task_id}", 30)
    robot.wait_for_output(rf"event=segment_cancelled robot=arm1 task={task_id}", 30)
    assert f"event=segment_executed robot=arm1 task={task_id}" not in robot.output()
    wait_until(lambda: not list(statuses[-1].robots_not_responding), 10, "arm1 responding")
    again = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    wait_until(lambda: again.accepted is True, 30, "a goal accepted for arm1 again")
    client.cancel(again)
    assert again.done.wait(30)


def test_a_killed_planner_ends_client_goals_and_stops_its_robots(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from timely_ros.plan_client import PlanClient, make_goal

    robot, planner = _start(node_processes, tmp_path)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(ARM_TASK)
    calls = [client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))]
    calls.append(client.send(make_goal("arm1", task["instruction"], scene=task["scene"])))
    # the goal that has the arm first streams its first segment; the other waits
    wait_until(lambda: any(c.segments for c in calls), 60, "a goal's first segment")
    robot.wait_for_output(r"event=segment_started robot=arm1", 30)
    planner.proc.kill()  # kill -9: no goodbye to anyone
    for call in calls:  # the running goal and the one queued behind it
        assert call.done.wait(20), "a client waited past the planner's death"
        assert call.result is None
        assert "the planner stopped responding" in call.client_error, call.client_error
    m = robot.wait_for_output(r"event=planner_lost robot=arm1 reason='([^']*)' stopped=(\d+)", 20)
    # the running segment, and the second task's first one when it already waits
    assert "stopped responding" in m.group(1) and int(m.group(2)) >= 1
    robot.wait_for_output(r"event=segment_stopped robot=arm1", 20)


def test_a_restarted_planner_is_told_apart_and_goals_report_the_loss(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from timely_interfaces.msg import ServiceStatus
    from timely_ros.plan_client import PlanClient, make_goal
    from timely_ros.qos import TOPIC

    robot, planner = _start(node_processes, tmp_path)
    statuses: list[ServiceStatus] = []
    ros_client.node.create_subscription(ServiceStatus, "/timely/status", statuses.append, TOPIC)
    client = PlanClient(ros_client.node, planner_timeout_s=30.0)  # only the restart tells
    assert client.wait_for_server(60), planner.output()
    wait_until(lambda: bool(statuses), 10, "a status")
    first = statuses[-1].incarnation
    task = lrtrace_goal_fields(ARM_TASK)
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    wait_until(lambda: len(call.segments) >= 1, 60, "the first segment")
    planner.proc.kill()
    planner.proc.wait(10)
    restarted = node_processes(_planner(tmp_path), "planner", "planner2")
    assert call.done.wait(60), restarted.output()[-3000:]
    assert "the planner restarted" in call.client_error, call.client_error
    wait_until(lambda: statuses[-1].incarnation not in ("", first), 30, "the new incarnation")
    robot.wait_for_output(
        r"event=planner_lost robot=arm1 reason='planner \S+ (restarted|stopped)", 20
    )


def test_rejections_name_the_goal_and_goals_time_out(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from std_msgs.msg import String
    from timely_ros.plan_client import PlanClient, make_goal
    from timely_ros.qos import TOPIC

    # long enough for the first segment to reach client and robot on a loaded machine
    robot, planner = _start(node_processes, tmp_path, result_timeout_s=6.0)
    rejections: list[dict[str, str]] = []
    ros_client.node.create_subscription(
        String, "/timely/rejections", lambda m: rejections.append(json.loads(m.data)), TOPIC
    )
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(ARM_TASK)
    # two identical bad goals: each rejection names its own goal
    bad = [client.send(make_goal("arm1", task["instruction"], urgency="asap")) for _ in range(2)]
    for call in bad:
        assert call.done.wait(30) and call.accepted is False
    wait_until(lambda: len(rejections) >= 2, 10, "two rejections")
    assert {r["goal_id"] for r in rejections} == {c.goal_id for c in bad}
    assert "urgency" in client.rejection_reason(bad[1])

    # a goal running past result_timeout_s is stopped and aborted, saying so
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    assert call.done.wait(60)
    assert call.status == GoalStatus.STATUS_ABORTED
    assert (
        "timed out" in call.final_result().error
        and "result_timeout_s=6" in call.final_result().error
    )
    task_id = call.segments[0].task_id
    robot.wait_for_output(rf"event=cancel_received robot=arm1 task={task_id}", 20)
