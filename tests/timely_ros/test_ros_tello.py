"""The tello backend (djitellopy) in a node process, against a fake Tello SDK 2.0 peer
on 127.0.0.2: exact command sequence (a path's legs as axis moves), `error` replies
(even ones containing "ok") and timeouts abort the goal with the drone's reason in one
line, a refused command is retried but an unanswered one never resent, a late reply is
never read as the next command's, cancel sends `stop` (hover)."""

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


def _executor(
    node_processes: StartNodes, ros_client: RosClient, timeout_s: int = 3, retry_count: int = 1
) -> tuple[Any, Any]:
    """A tello executor node for the fake drone on 127.0.0.2, and an action client to it."""
    from rclpy.action import ActionClient
    from timely_interfaces.action import ExecuteSkill
    from timely_ros.qos import action_client_qos

    config = executor_entry(
        "tello1",
        "tello",
        tello_host="127.0.0.2",
        tello_port=PORT,
        tello_timeout_s=timeout_s,  # every reply, from the fake's thread in this busy process
        tello_retry_count=retry_count,
    )
    proc = node_processes(config, "executors", "tello")
    client: Any = ActionClient(
        ros_client.node, ExecuteSkill, "/tello1/execute_skill", **action_client_qos()
    )
    assert client.wait_for_server(timeout_sec=30), proc.output()
    return client, proc


def test_tello_command_sequence_errors_timeouts_and_cancel(
    node_processes: StartNodes, ros_client: RosClient
) -> None:
    from action_msgs.msg import GoalStatus

    with FakeTello("127.0.0.2", PORT, motion_s=0.05) as fake:
        client, proc = _executor(node_processes, ros_client)

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
        assert "cw 90: no answer within 3 s" in result.message, result.message
        assert fake.received()[-1] == "cw 90"
        fake.silent.clear()

        # cw 90 still owes its answer: the next command awaits it in vain and is not
        # sent (it could take that answer for its own); the one after is sent again
        result, status, _ = _run(client, _goal("owed", [("land", [])]))
        assert status == GoalStatus.STATUS_ABORTED and not result.success
        assert "land: not sent" in result.message and "'cw 90'" in result.message
        assert fake.received()[-1] == "cw 90"

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

        # the stop's answer and the stopped move's are both skipped: land reads its own
        fake.motion_s = 0.05
        result, status, _ = _run(client, _goal("land", [("land", [])]))
        assert result.success and status == GoalStatus.STATUS_SUCCEEDED, result.message
        assert fake.received()[before:] == ["forward 500", "stop", "land"]


def _one_line_failure(result: Any, command: str, answer: str) -> None:
    """The goal failed naming the command and the drone's answer once, in one line,
    claiming no tries beyond the one sent."""
    assert not result.success
    message = result.message
    assert f"{command}: the drone answered '{answer}'" in message, message
    assert message.count(answer) == 1, message
    assert "tries" not in message and "\t" not in message and "\n" not in message, message


def test_tello_error_answer_containing_ok_fails_with_the_drones_words(
    node_processes: StartNodes, ros_client: RosClient
) -> None:
    from action_msgs.msg import GoalStatus

    with FakeTello("127.0.0.2", PORT, motion_s=0.05) as fake:
        client, _ = _executor(node_processes, ros_client)
        result, status, _ = _run(client, _goal("up", [("takeoff", [])]))
        assert result.success, result.message

        # only `ok` is success: these refusals contain the letters "ok"
        for reason in ("No valid imu, look at props", "Unknown token"):
            fake.fail["forward"] = reason
            before = len(fake.received())
            result, status, _ = _run(client, _goal("ok?", [("move_forward", ["50"]), ("land", [])]))
            assert status == GoalStatus.STATUS_ABORTED
            _one_line_failure(result, "forward 50", f"error {reason}")
            assert fake.received()[before:] == ["forward 50"]  # sent once, land never
        del fake.fail["forward"]

        result, status, _ = _run(client, _goal("down", [("land", [])]))
        assert result.success and status == GoalStatus.STATUS_SUCCEEDED, result.message


def test_tello_late_answer_is_not_taken_for_the_next_commands(
    node_processes: StartNodes, ros_client: RosClient
) -> None:
    from action_msgs.msg import GoalStatus

    with FakeTello("127.0.0.2", PORT, motion_s=0.05) as fake:
        client, _ = _executor(node_processes, ros_client, timeout_s=4)
        result, status, _ = _run(client, _goal("up", [("takeoff", [])]))
        assert result.success, result.message

        # forward's `ok` comes 2 s after its 4 s timeout, while cw 90 would await its own
        fake.late["forward"] = 6.0
        result, status, _ = _run(client, _goal("long", [("move_forward", ["50"])]))
        assert status == GoalStatus.STATUS_ABORTED
        assert "forward 50: no answer within 4 s" in result.message, result.message

        # cw 90 is refused, 2.5 s on: that refusal is its answer, not forward's late `ok`
        fake.late["cw"] = 2.5
        fake.fail["cw"] = "Motor stop"
        result, status, _ = _run(client, _goal("turn", [("turn_cw", ["90"])]))
        assert status == GoalStatus.STATUS_ABORTED
        _one_line_failure(result, "cw 90", "error Motor stop")
        fake.late.clear()
        fake.fail.clear()

        # and land reads its own `ok`, not cw's refusal
        result, status, _ = _run(client, _goal("down", [("land", [])]))
        assert result.success and status == GoalStatus.STATUS_SUCCEEDED, result.message
        assert fake.received() == ["command", "takeoff", "forward 50", "cw 90", "land"]


def test_tello_resends_only_a_refused_command(
    node_processes: StartNodes, ros_client: RosClient
) -> None:
    from action_msgs.msg import GoalStatus

    with FakeTello("127.0.0.2", PORT, motion_s=0.05) as fake:
        client, _ = _executor(node_processes, ros_client, retry_count=2)
        result, status, _ = _run(client, _goal("up", [("takeoff", [])]))
        assert result.success, result.message

        # a refused command did not run: it is sent again, and the message says so
        fake.fail["forward"] = "Motor stop"
        result, status, _ = _run(client, _goal("err", [("move_forward", ["50"])]))
        assert status == GoalStatus.STATUS_ABORTED
        assert (
            "forward 50: the drone answered 'error Motor stop' (the last of 2 tries)"
            in result.message
        ), result.message
        assert "\t" not in result.message
        assert fake.received()[-2:] == ["forward 50", "forward 50"]
        del fake.fail["forward"]

        # an unanswered move may be under way: it is never sent again
        fake.silent.add("cw")
        before = len(fake.received())
        result, status, _ = _run(client, _goal("silent", [("turn_cw", ["90"])]))
        assert status == GoalStatus.STATUS_ABORTED
        assert "cw 90: no answer within 3 s" in result.message, result.message
        assert fake.received()[before:] == ["cw 90"]
