"""Cancelling a PlanTask mid-plan stops the generation and frees its KV at once and
cancels the robot's outstanding ExecuteSkill goal. Times are the nodes' own
monotonic timestamps (one clock for every process on the machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    executor_entry,
    lrtrace_goal_fields,
    sim_planner_entry,
    start_arm_and_planner,
    wait_until,
)

pytestmark = pytest.mark.ros


def test_cancel_mid_plan_stops_generation_and_robot(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_interfaces.msg import ServiceStatus
    from timely_ros.plan_client import PlanClient, make_goal
    from timely_ros.qos import TOPIC

    planner = sim_planner_entry(tmp_path, status_period_s=0.2)
    robot = node_processes(executor_entry("arm1", "sim-arm", time_scale=0.3), "executors", "arm")
    planner_proc = node_processes(planner, "planner", "planner")
    statuses: list[ServiceStatus] = []
    ros_client.node.create_subscription(ServiceStatus, "/timely/status", statuses.append, TOPIC)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner_proc.output()
    robot.wait_for_output("robot arm1: sim-arm executor ready", 60)
    wait_until(lambda: len(statuses) >= 1, 30, "a status message")
    idle_kv = statuses[-1].kv_device_used_fraction  # the pinned robot prompt only

    task = lrtrace_goal_fields(10)  # desk cleaning: many segments, seconds each
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    wait_until(lambda: len(call.segments) >= 2, 60, "the second segment")
    wait_until(
        lambda: statuses[-1].suspended_generations + statuses[-1].running_generations >= 1,
        5,
        "the generation held between segments",
    )
    client.cancel(call)
    assert call.done.wait(30)
    assert call.status == GoalStatus.STATUS_CANCELED
    assert "cancelled" in call.final_result().error
    task_id = call.segments[0].task_id

    # The target is 100 ms for both stops; measured on a quiet machine: 9.5-16 ms
    # (generation) and 2-3 ms (robot), printed below. The bounds asserted are 3 s, an
    # order below a plan's length: on a loaded machine a woken thread can wait for a
    # core (seen once in a full CI-style run: 130 ms from hearing the cancel to
    # stopping); the order of the events is what is checked exactly.
    # the planner stopped the generation (and freed its KV)
    m = planner_proc.wait_for_output(
        rf"event=plan_cancelled task={task_id} robot=arm1 mono=([\d.]+) "
        r"generation_stopped_mono=([\d.]+)",
        10,
    )
    cancel_at, generation_stopped = float(m.group(1)), float(m.group(2))
    assert 0 <= generation_stopped - cancel_at < 3.0
    # the robot's goal was cancelled and the robot stopped on hearing it
    heard = robot.wait_for_output(
        rf"event=cancel_received robot=arm1 task={task_id} \S+ mono=([\d.]+)", 10
    )
    stopped = robot.wait_for_output(
        rf"event=segment_cancelled robot=arm1 task={task_id} \S+ mono=([\d.]+)", 10
    )
    robot_heard, robot_stopped = float(heard.group(1)), float(stopped.group(1))
    assert 0 <= robot_stopped - robot_heard < 3.0
    # planner -> robot is one DDS hop
    assert 0 <= robot_heard - cancel_at < 3.0
    print(
        f"cancel: generation stopped {1e3 * (generation_stopped - cancel_at):.1f} ms, "
        f"robot heard {1e3 * (robot_heard - cancel_at):.1f} ms, "
        f"robot stopped {1e3 * (robot_stopped - robot_heard):.1f} ms after hearing"
    )
    # no segment after the cancel reached the robot
    executed = robot.output().count(f"event=segment_executed robot=arm1 task={task_id}")
    assert executed <= len(call.segments) - 1

    # KV freed: nothing running or suspended, KV use back to the idle level
    def freed() -> bool:
        s = statuses[-1]
        return (
            s.tasks_cancelled >= 1
            and s.running_generations == 0
            and s.suspended_generations == 0
            and abs(s.kv_device_used_fraction - idle_kv) < 1e-9
        )

    wait_until(freed, 30, "KV freed in /timely/status")


def test_robot_going_away_mid_plan_ends_the_task(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    robot, planner_proc = start_arm_and_planner(node_processes, tmp_path, time_scale=1.0)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner_proc.output()
    task = lrtrace_goal_fields(10)
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    wait_until(lambda: len(call.segments) >= 1, 60, "the first segment")
    robot.stop()  # the robot's process shuts down while it executes segment 0
    # the planner notices its action server gone (a shutdown) or, for a killed
    # process, its heartbeat gone (test_ros_liveness)
    assert call.done.wait(60), planner_proc.output()[-3000:]
    assert call.status == GoalStatus.STATUS_ABORTED
    error = call.final_result().error
    assert "robot arm1 went away during segment 0" in error, error
    assert "aborted" not in error  # the robot did not abort it: it left
