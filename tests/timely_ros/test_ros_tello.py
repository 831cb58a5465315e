"""The tello backend (djitellopy) in a node process, against a fake Tello SDK 2.0 peer
on 127.0.0.2: exact command sequence (a path's legs as axis moves), `error` replies
and timeouts abort the goal with the drone's reason, cancel sends `stop` (hover)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from timely_ros.fake_tello import FakeTello

from tests.timely_ros.ros_support import RosClient, StartNodes, executor_entry, wait_until

pytestmark = pytest.mark.ros

PORT = 18889


def _goal(task: str, calls: list[tuple[str, list[str]]]) -> Any:
    from timely_interfaces.action import ExecuteSkill
    from timely_interfaces.msg import Skill

    skills = [Skill(name=n, args=a, raw_text=f"{n}({', '.join(a)})") for n, a in calls]
    return ExecuteSkill.Goal(task_id=task, segment_index=0, skills=skills)


def _run(client: Any, goal: Any, timeout_s: float = 30) -> tuple[Any, int, list[str]]:
    done = threading.Event()
    out: dict[str, Any] = {"feedback": []}

    def on_result(fut: Any) -> None:
        out["result"], out["status"] = fut.result().result, fut.result().status
        done.set()

    def on_accept(fut: Any) -> None:
        out["handle"] = fut.result()
        fut.result().get_result_async().add_done_callback(on_result)

    client.send_goal_async(
        goal, feedback_callback=lambda m: out["feedback"].append(m.feedback.current_skill)
    ).add_done_callback(on_accept)
    assert done.wait(timeout_s)
    return out["result"], out["status"], out["feedback"]


def test_tello_command_sequence_errors_timeouts_and_cancel(
    node_processes: StartNodes, ros_client: RosClient
) -> None:
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from timely_interfaces.action import ExecuteSkill
    from timely_ros.qos import action_client_qos

    with FakeTello("127.0.0.2", PORT, motion_s=0.05) as fake:
        config = executor_entry(
            "tello1",
            "tello",
            tello_host="127.0.0.2",
            tello_port=PORT,
            tello_timeout_s=3,  # every reply, from the fake's thread in this busy process
            tello_retry_count=1,
        )
        proc = node_processes(config, "executors", "tello")
        client: Any = ActionClient(
            ros_client.node, ExecuteSkill, "/tello1/execute_skill", **action_client_qos()
        )
        assert client.wait_for_server(timeout_sec=30), proc.output()

        plan = [
            ("takeoff", []),
            ("move_forward", ["100"]),
            ("turn_cw", ["90"]),
            ("move_up", ["30"]),
            ("delay", ["0.2"]),
            ("move_left", ["50"]),
            ("turn_ccw", ["45"]),
            ("land", []),
        ]
        result, status, feedback = _run(client, _goal("plan", plan))
        assert result.success, proc.output()[-3000:]
        assert status == GoalStatus.STATUS_SUCCEEDED
        assert fake.received() == [
            "command",
            "takeoff",
            "forward 100",
            "cw 90",
            "up 30",
            "left 50",
            "ccw 45",
            "land",
        ]
        # telemetry from the drone's state stream rides in the feedback
        assert any("bat 87%" in f for f in feedback), feedback
        assert any("h 100cm" in f for f in feedback), feedback

        # an `error` reply aborts the goal with the drone's reason
        fake.fail["forward"] = "Motor stop"
        result, status, _ = _run(client, _goal("err", [("move_forward", ["50"]), ("land", [])]))
        assert status == GoalStatus.STATUS_ABORTED and not result.success
        assert "error Motor stop" in result.message and "forward 50" in result.message
        assert fake.received()[-1] == "forward 50"  # land was never sent
        del fake.fail["forward"]

        # no reply within the timeout aborts with the reason
        fake.silent.add("cw")
        result, status, _ = _run(client, _goal("silent", [("turn_cw", ["90"]), ("land", [])]))
        assert status == GoalStatus.STATUS_ABORTED and not result.success
        assert "cw 90" in result.message and "response" in result.message
        assert fake.received()[-1] == "cw 90"
        fake.silent.clear()

        # a path flies leg by leg as moves along the drone's axes; a leg the SDK
        # cannot fly fails the call before anything of it is sent
        before = len(fake.received())
        legs = ["100", "0", "50", "0", "-40", "0"]
        result, status, _ = _run(client, _goal("path", [("fly_path", legs)]))
        assert result.success and status == GoalStatus.STATUS_SUCCEEDED, result.message
        assert fake.received()[before:] == ["forward 100", "up 50", "right 40"]
        short = ["100", "0", "0", "0", "15", "0"]
        result, status, _ = _run(client, _goal("short", [("fly_path", short)]))
        assert status == GoalStatus.STATUS_ABORTED and "left 15 cm is shorter" in result.message
        assert len(fake.received()) == before + 3

        # perception needs a vision pipeline the backend does not have
        result, status, _ = _run(client, _goal("vision", [("is_visible", ["'cat'"])]))
        assert status == GoalStatus.STATUS_ABORTED and "is_visible" in result.message

        # cancel during a long move: `stop` is sent and the goal ends cancelled
        fake.motion_s = 20.0
        before = len(fake.received())
        done = threading.Event()
        out: dict[str, Any] = {}

        def on_result(fut: Any) -> None:
            out["status"] = fut.result().status
            done.set()

        def on_accept(fut: Any) -> None:
            out["handle"] = fut.result()
            fut.result().get_result_async().add_done_callback(on_result)

        client.send_goal_async(
            _goal("long", [("move_forward", ["500"]), ("land", [])])
        ).add_done_callback(on_accept)
        wait_until(
            lambda: "handle" in out and "forward 500" in fake.received()[before:],
            30,
            "the long move, accepted",
        )
        out["handle"].cancel_goal_async()
        assert done.wait(15)
        assert out["status"] == GoalStatus.STATUS_CANCELED
        assert fake.received()[before:] == ["forward 500", "stop"]
