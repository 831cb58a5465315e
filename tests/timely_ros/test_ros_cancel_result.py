"""A cancelled PlanTask's result carries the service's figures of its task: the
response time (arrival -> dispatch of segment 0), the waiting time and the utility
(TUF0 of the response), not zeros that read as a goal that never started; a goal
cancelled before any dispatch reports the time it waited and utility 0. Only
behaviour is asserted (no wall-clock bounds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    start_arm_and_planner,
    wait_until,
)

pytestmark = pytest.mark.ros


def test_cancel_after_dispatch_reports_the_services_times_and_utility(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    from timely_core.scheduling.tuf import Tuf

    # the arm at its modelled speed: segment 0 runs for seconds, so the cancel finds
    # it running on the robot
    robot, planner = start_arm_and_planner(node_processes, tmp_path, time_scale=1.0)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(10)  # desk cleaning: many segments
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    wait_until(lambda: len(call.segments) >= 1, 60, "the first segment (feedback)")
    task_id = call.segments[0].task_id
    robot.wait_for_output(rf"event=segment_started robot=arm1 task={task_id}", 30)
    client.cancel(call)
    assert call.done.wait(30), planner.output()[-3000:]

    assert call.status == GoalStatus.STATUS_CANCELED
    result = call.final_result()
    assert not result.success
    assert result.error == "cancelled by the client"
    assert result.segment_count >= 1 and result.segment_count == len(result.segments)
    assert result.plan == "".join(s.text for s in result.segments)
    # the service's figures of what was dispatched
    assert result.response_time_s > 0, result
    assert result.waiting_time_s >= result.response_time_s, result
    # utility: TUF0 on the response time, as the service's TaskResult has it
    assert result.utility == pytest.approx(Tuf.normal().utility(result.response_time_s))


def test_cancel_before_dispatch_reports_the_time_waited(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_interfaces.msg import ServiceStatus
    from timely_ros.plan_client import PlanClient, make_goal
    from timely_ros.qos import TOPIC

    # fcfs: the plan is one segment, emitted when the whole plan is decoded (seconds
    # for this task on the paced engine), so the goal is cancelled while it is planned
    _, planner = start_arm_and_planner(
        node_processes, tmp_path, time_scale=1.0, policy="fcfs", status_period_s=0.1
    )
    statuses: list[ServiceStatus] = []
    ros_client.node.create_subscription(ServiceStatus, "/timely/status", statuses.append, TOPIC)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    task = lrtrace_goal_fields(10)
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    wait_until(
        lambda: (
            bool(statuses) and statuses[-1].queue_length + statuses[-1].running_generations >= 1
        ),
        60,
        "the task in the service",
    )
    client.cancel(call)
    assert call.done.wait(30), planner.output()[-3000:]

    assert call.status == GoalStatus.STATUS_CANCELED
    result = call.final_result()
    assert not result.success and result.error == "cancelled by the client"
    assert result.segment_count == 0 and not result.segments and not call.segments
    # as the service reports a task ended before its first dispatch: the time it
    # waited so far, all of it waiting, and no utility
    assert result.response_time_s > 0, result
    assert result.waiting_time_s == pytest.approx(result.response_time_s)
    assert result.utility == 0.0
