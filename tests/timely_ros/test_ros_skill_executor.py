"""The skill-executor node (sim backends) in its own process, driven over DDS."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.timely_ros.ros_support import RosClient, StartNodes, executor_entry, wait_until

pytestmark = pytest.mark.ros


def _goal(task: str, index: int, calls: list[tuple[str, list[str]]]) -> Any:
    from timely_interfaces.action import ExecuteSkill
    from timely_interfaces.msg import Skill

    skills = [Skill(name=n, args=a, raw_text=f"{n}({', '.join(a)})") for n, a in calls]
    return ExecuteSkill.Goal(task_id=task, segment_index=index, skills=skills)


class _Call:
    def __init__(self) -> None:
        self.feedback: list[float] = []
        self.handle: Any = None
        self.result: Any = None
        self.status = 0
        self.done = threading.Event()


def _send(client: Any, goal: Any) -> _Call:
    call = _Call()

    def on_result(fut: Any) -> None:
        call.result = fut.result().result
        call.status = fut.result().status
        call.done.set()

    def on_accept(fut: Any) -> None:
        call.handle = fut.result()
        call.handle.get_result_async().add_done_callback(on_result)

    client.send_goal_async(
        goal, feedback_callback=lambda m: call.feedback.append(m.feedback.progress)
    ).add_done_callback(on_accept)
    return call


def test_sim_executors_run_validate_and_cancel(
    node_processes: StartNodes, ros_client: RosClient
) -> None:
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from timely_interfaces.action import ExecuteSkill
    from timely_ros.qos import action_client_qos

    config = {
        **executor_entry("drone1", "sim-drone", time_scale=0.05, feedback_period_s=0.02),
        **executor_entry("arm1", "sim-arm", time_scale=0.05, feedback_period_s=0.02),
        # real time: its minute of hovering cannot end before the cancel, however slow
        **executor_entry("drone2", "sim-drone", time_scale=1.0, feedback_period_s=0.02),
    }
    proc = node_processes(config, "executors", "executors")
    node = ros_client.node
    drone: Any = ActionClient(node, ExecuteSkill, "/drone1/execute_skill", **action_client_qos())
    arm: Any = ActionClient(node, ExecuteSkill, "/arm1/execute_skill", **action_client_qos())
    assert drone.wait_for_server(timeout_sec=30), proc.output()
    assert arm.wait_for_server(timeout_sec=30), proc.output()
    hover: Any = ActionClient(node, ExecuteSkill, "/drone2/execute_skill", **action_client_qos())
    assert hover.wait_for_server(timeout_sec=30), proc.output()

    ok = _send(drone, _goal("t1", 0, [("takeoff", []), ("move_forward", ["100"])]))
    pick = _send(arm, _goal("t2", 0, [("pick", ["'cup'"]), ("place", ["'tray'"])]))
    unknown = _send(drone, _goal("t3", 0, [("takeoff", []), ("backflip", [])]))
    bad_arg = _send(drone, _goal("t4", 0, [("move_forward", ["5000"])]))
    wrong_robot = _send(arm, _goal("t5", 0, [("takeoff", [])]))
    for call in (ok, pick, unknown, bad_arg, wrong_robot):
        assert call.done.wait(60), proc.output()

    assert ok.result.success and ok.status == GoalStatus.STATUS_SUCCEEDED
    assert ok.feedback and ok.feedback == sorted(ok.feedback) and max(ok.feedback) <= 1.0
    assert pick.result.success and pick.feedback
    assert not unknown.result.success and unknown.status == GoalStatus.STATUS_ABORTED
    assert "backflip" in unknown.result.message and "skill 1" in unknown.result.message
    assert not bad_arg.result.success
    assert "distance" in bad_arg.result.message and "5000" in bad_arg.result.message
    assert not wrong_robot.result.success and "takeoff" in wrong_robot.result.message

    # cancel mid-segment: a minute's hover (real time) stops long before its end
    minute = [("delay", ["30.0"]), ("delay", ["30.0"]), ("land", [])]
    long = _send(hover, _goal("t6", 0, minute))
    wait_until(lambda: len(long.feedback) >= 2, 30, "feedback of the long segment")
    sent = time.monotonic()
    long.handle.cancel_goal_async()
    assert long.done.wait(30)
    assert long.status == GoalStatus.STATUS_CANCELED
    assert "cancelled" in long.result.message
    # the node's own timestamp of the cancel (same monotonic clock, same machine)
    match = proc.wait_for_output(r"event=cancel_received robot=drone2 task=t6 .*mono=([\d.]+)", 30)
    assert float(match.group(1)) >= sent
