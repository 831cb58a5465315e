"""The planner's link to a robot: a segment cancelled after it was sent but before the
robot accepted it must still be cancelled on the robot once it is accepted (it used
to run whole: the cancel found no goal handle yet). A real ExecuteSkill server that
accepts slowly, over Fast DDS, in the test process."""

from __future__ import annotations

import threading
import time

import pytest

from tests.timely_ros.ros_support import RosClient, wait_until

pytestmark = pytest.mark.ros


def test_a_cancel_before_the_robot_accepts_still_stops_the_robot(ros_client: RosClient) -> None:
    from rclpy.action import ActionServer, CancelResponse, GoalResponse
    from rclpy.action.server import ServerGoalHandle
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.node import Node
    from timely_interfaces.action import ExecuteSkill
    from timely_interfaces.msg import Segment as SegmentMsg
    from timely_ros.config import RobotSpec
    from timely_ros.qos import action_server_qos
    from timely_ros.robot_link import Outcome, RobotLink, SegmentRun

    accept = threading.Event()
    events: list[str] = []

    def on_goal(_request: ExecuteSkill.Goal) -> GoalResponse:
        accept.wait(10)  # the robot is slow to confirm the goal
        events.append("accepted")
        return GoalResponse.ACCEPT

    def on_cancel(_handle: ServerGoalHandle) -> CancelResponse:
        events.append("cancel requested")
        return CancelResponse.ACCEPT

    def execute(handle: ServerGoalHandle) -> ExecuteSkill.Result:
        deadline = time.monotonic() + 3.0  # the segment's motion
        while time.monotonic() < deadline:
            if handle.is_cancel_requested:
                handle.canceled()
                events.append("stopped")
                return ExecuteSkill.Result(success=False, message="stopped")
            time.sleep(0.01)
        handle.succeed()
        events.append("ran the whole segment")
        return ExecuteSkill.Result(success=True)

    group = ReentrantCallbackGroup()
    robot = Node("slow_robot", context=ros_client.context)
    server = ActionServer(
        robot,
        ExecuteSkill,
        "/slow1/execute_skill",
        execute_callback=execute,
        goal_callback=on_goal,
        cancel_callback=on_cancel,
        callback_group=group,
        **action_server_qos(),
    )
    ros_client.executor.add_node(robot)
    try:
        link = RobotLink(ros_client.node, RobotSpec(id="slow1", type="drone"), group)
        assert link.wait_ready(10)
        run = SegmentRun()
        outcome: list[Outcome] = []
        segment = SegmentMsg(task_id="t1", index=0, text="mf(50);")
        sender = threading.Thread(
            target=lambda: outcome.append(link.execute(segment, run, lambda _f: None))
        )
        sender.start()
        time.sleep(0.5)  # the goal is on its way; the robot has not confirmed it
        run.cancel()
        sender.join(10)
        assert outcome and outcome[0].cancelled
        accept.set()  # now the robot confirms it
        wait_until(lambda: "stopped" in events or "ran the whole segment" in events, 10, "the end")
        assert events == ["accepted", "cancel requested", "stopped"]
    finally:
        accept.set()
        server.destroy()
        ros_client.executor.remove_node(robot)
        robot.destroy_node()
