"""A client that is not ours: rclpy's stock `ActionClient` with its default QoS,
as in rclpy's minimal action client example, sending PlanTask goals it fills only
partly. A goal with just a robot, an instruction and a scene is planned at the
'normal' urgency and streamed as feedback without reaching the robot (`dispatch` false);
with `dispatch` set, every segment runs on the simulated arm. A cancel from the
same client stops its goal."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.timely_ros.ros_support import (
    NodeProcess,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    start_arm_and_planner,
    wait_until,
)

pytestmark = pytest.mark.ros

TASK = 10  # the arm's "Clean the desk": several segments


class StockGoal:
    """One goal through rclpy's own client: its feedback, handle and result."""

    def __init__(self, client: Any, goal: Any) -> None:
        self.segments: list[Any] = []
        self.accepted = threading.Event()
        self.done = threading.Event()
        self.handle: Any = None
        self.result: Any = None
        self.status: int | None = None
        send = client.send_goal_async(goal, feedback_callback=self._on_feedback)
        send.add_done_callback(self._on_answer)

    def _on_feedback(self, message: Any) -> None:
        self.segments.append(message.feedback.segment)

    def _on_answer(self, future: Any) -> None:
        self.handle = future.result()
        self.accepted.set()
        if self.handle.accepted:
            self.handle.get_result_async().add_done_callback(self._on_result)
        else:
            self.done.set()

    def _on_result(self, future: Any) -> None:
        response = future.result()
        self.result, self.status = response.result, response.status
        self.done.set()


def _start(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path, time_scale: float
) -> tuple[NodeProcess, NodeProcess, Any]:
    """The simulated arm, a simulated-engine planner, and a stock client of its
    PlanTask action once it sees the server."""
    from rclpy.action import ActionClient
    from timely_interfaces.action import PlanTask

    robot, planner = start_arm_and_planner(node_processes, tmp_path, time_scale=time_scale)
    client: Any = ActionClient(ros_client.node, PlanTask, "/timely/plan_task")
    assert client.wait_for_server(timeout_sec=60), planner.output()[-3000:]
    return robot, planner, client


def test_a_stock_client_with_a_bare_goal_gets_the_plan_and_the_robot_stays_still(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_interfaces.action import PlanTask

    robot, planner, client = _start(node_processes, ros_client, tmp_path, 0.05)
    task = lrtrace_goal_fields(TASK)
    fields = {"robot_id": "arm1", "instruction": task["instruction"], "scene": task["scene"]}
    bare = StockGoal(client, PlanTask.Goal(**fields))
    assert bare.done.wait(90), planner.output()[-3000:]
    assert bare.status == GoalStatus.STATUS_SUCCEEDED, bare.result.error
    assert bare.result.plan == task["plan"]
    assert [s.text for s in bare.segments] == [s.text for s in bare.result.segments]
    assert "".join(s.text for s in bare.segments) == task["plan"]
    assert 0 < bare.result.utility <= 1.0  # the 'normal' preset's initial utility
    assert "event=segment_started" not in robot.output()

    dispatched = StockGoal(client, PlanTask.Goal(**fields, dispatch=True))
    assert dispatched.done.wait(90), planner.output()[-3000:]
    assert dispatched.status == GoalStatus.STATUS_SUCCEEDED, dispatched.result.error
    task_id = dispatched.result.segments[0].task_id
    executed = re.findall(rf"event=segment_executed robot=arm1 task={task_id} ", robot.output())
    assert len(executed) == dispatched.result.segment_count > 1


def test_a_stock_client_cancels_its_goal_and_a_bad_goal_is_refused(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_interfaces.action import PlanTask

    robot, planner, client = _start(node_processes, ros_client, tmp_path, 1.0)
    task = lrtrace_goal_fields(TASK)
    fields = {"instruction": task["instruction"], "scene": task["scene"]}
    unknown = StockGoal(client, PlanTask.Goal(robot_id="arm9", **fields))
    assert unknown.done.wait(30)
    assert not unknown.handle.accepted
    planner.wait_for_output("robot_id 'arm9' is not served by this planner", 30)

    running = StockGoal(client, PlanTask.Goal(robot_id="arm1", dispatch=True, **fields))
    wait_until(lambda: bool(running.segments), 60, "the first segment")
    robot.wait_for_output(r"event=segment_started robot=arm1 ", 60)
    cancel = running.handle.cancel_goal_async()
    wait_until(cancel.done, 30, "the cancel's answer")
    assert len(cancel.result().goals_canceling) == 1
    assert running.done.wait(30), planner.output()[-3000:]
    assert running.status == GoalStatus.STATUS_CANCELED
    task_id = running.segments[0].task_id
    robot.wait_for_output(rf"event=segment_cancelled robot=arm1 task={task_id} ", 30)
    assert running.result.segment_count == len(running.result.segments) >= 1
