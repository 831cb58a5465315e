"""The planner as a managed (lifecycle) node, driven from another process with
`timely lifecycle` and the standard lifecycle and parameter services: goals are
rejected until it is active, deactivate drains a running goal to its end, cleanup
unloads the model, parameters set while unconfigured take effect at configure and
are refused while configured."""

from __future__ import annotations

import signal
import subprocess
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.timely_ros.ros_support import (
    PYTHON,
    REPO,
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    ros_env,
    start_arm_and_planner,
    timely_cli,
    wait_until,
)

PLANNER = "/timely/timely_planner"


# a configure loads the model
_timely = partial(timely_cli, timeout_s=180)


def _set_policy(client: RosClient, value: str) -> tuple[bool, str]:
    """Set the planner's `policy` through its set_parameters service (as
    `ros2 param set` does)."""
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    service: Any = client.node.create_client(SetParameters, f"{PLANNER}/set_parameters")
    assert service.wait_for_service(timeout_sec=30)
    request = SetParameters.Request(
        parameters=[
            Parameter(
                name="policy",
                value=ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value),
            )
        ]
    )
    future: Any = service.call_async(request)
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(30), "no answer from set_parameters"
    result = future.result().results[0]
    return bool(result.successful), str(result.reason)


@pytest.mark.ros
@pytest.mark.slow
def test_lifecycle_configure_activate_drain_cleanup(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    _robot, proc = start_arm_and_planner(
        node_processes, tmp_path, time_scale=0.25, autostart=False, drain_timeout_s=60.0
    )
    proc.wait_for_output("unconfigured \\(autostart false\\)", 60)
    assert "configured (incarnation" not in proc.output()  # no model loaded yet

    got = _timely(tmp_path, "lifecycle", "get", "--wait", "30")
    assert got.returncode == 0 and got.stdout.strip() == f"{PLANNER}: unconfigured", got
    status = _timely(tmp_path, "status")
    assert status.returncode == 0, status.stderr
    assert ": unconfigured (no model loaded" in status.stdout, status.stdout
    assert "arm1" in status.stdout, status.stdout

    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), proc.output()
    task = lrtrace_goal_fields(9)
    goal = make_goal("arm1", task["instruction"], scene=task["scene"])
    early = client.send(goal)
    assert early.done.wait(30) and early.accepted is False
    assert "is unconfigured: it accepts goals only when active" in client.rejection_reason(early, 5)

    # a parameter set while unconfigured takes effect at configure
    ok, reason = _set_policy(ros_client, "fcfs")
    assert ok, reason
    configure = _timely(tmp_path, "lifecycle", "configure", "--wait", "30")
    assert configure.returncode == 0, configure.stderr
    assert configure.stdout.strip() == f"{PLANNER}: unconfigured -> inactive"
    proc.wait_for_output("policy fcfs", 10)
    inactive = client.send(goal)
    assert inactive.done.wait(30) and inactive.accepted is False
    assert "is inactive" in client.rejection_reason(inactive, 5)
    # ... and is refused while configured, saying why
    ok, reason = _set_policy(ros_client, "edf")
    assert not ok and "reads its parameters at configure and is inactive" in reason

    activate = _timely(tmp_path, "lifecycle", "activate", "--wait", "30")
    assert activate.stdout.strip() == f"{PLANNER}: inactive -> active", activate.stderr

    # deactivate while a goal runs on the robot: the goal ends normally (drained),
    # and only then is the planner inactive
    running = client.send(goal)
    wait_until(lambda: len(running.segments) >= 1, 60, "the first segment")
    # (its first segment, fifteen arm skills, takes the robot about 9 s at time_scale
    # 0.25: still running when the deactivate arrives)
    deactivate = _timely(tmp_path, "lifecycle", "deactivate", "--wait", "30")
    assert deactivate.returncode == 0, deactivate.stderr
    assert running.done.is_set(), "deactivate returned before the running goal ended"
    proc.wait_for_output("deactivating: draining 1 active goal", 5)
    assert running.status == GoalStatus.STATUS_SUCCEEDED, running.final_result().error
    assert running.final_result().segment_count == len(running.segments) >= 1
    after = client.send(goal)
    assert after.done.wait(30) and after.accepted is False

    cleanup = _timely(tmp_path, "lifecycle", "cleanup", "--wait", "30")
    assert cleanup.stdout.strip() == f"{PLANNER}: inactive -> unconfigured", cleanup.stderr
    # an impossible transition is refused, naming those the planner can take
    refused = _timely(tmp_path, "lifecycle", "activate", "--wait", "30")
    assert refused.returncode == 1, refused.stdout
    assert (
        "is unconfigured: activate is not possible from there (possible: configure, "
        "shutdown)" in refused.stderr
    ), refused.stderr
    ok, reason = _set_policy(ros_client, "timely")  # unconfigured again: parameters settable
    assert ok, reason

    # and it comes back: configure + activate serve goals again
    assert _timely(tmp_path, "lifecycle", "configure").returncode == 0
    assert _timely(tmp_path, "lifecycle", "activate").returncode == 0
    again = client.send(goal)
    assert again.done.wait(120)
    assert again.status == GoalStatus.STATUS_SUCCEEDED, again.final_result().error
    status = _timely(tmp_path, "status")
    assert "(simulated, timely): active" in status.stdout, status.stdout

    # shutdown: the planner serves nothing any more, so `timely up` stops
    shutdown = _timely(tmp_path, "lifecycle", "shutdown", "--wait", "30")
    assert shutdown.stdout.strip() == f"{PLANNER}: active -> finalized", shutdown.stderr
    assert proc.proc.wait(timeout=30) == 0, proc.output()
    assert "the planner was shut down (lifecycle); stopping" in proc.output()


@pytest.mark.ros
def test_deactivate_stops_goals_that_outlast_the_drain(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    # a slow robot: its plan cannot end within the drain
    robot, proc = start_arm_and_planner(
        node_processes, tmp_path, time_scale=5.0, drain_timeout_s=0.5
    )
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), proc.output()
    task = lrtrace_goal_fields(10)
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    wait_until(lambda: len(call.segments) >= 1, 60, "the first segment")
    deactivate = _timely(tmp_path, "lifecycle", "deactivate", "--wait", "30")
    assert deactivate.returncode == 0, deactivate.stderr
    assert call.done.wait(30)
    assert call.status == GoalStatus.STATUS_ABORTED
    assert "planner deactivated: the goal did not end within 0.5 s" in call.final_result().error
    task_id = call.segments[0].task_id
    robot.wait_for_output(rf"event=segment_cancelled robot=arm1 task={task_id}", 20)


@pytest.mark.ros
@pytest.mark.parametrize("transition", ["get", "activate"])
def test_ctrl_c_while_waiting_for_a_planner_ends_quietly_with_130(
    ros_client: RosClient, tmp_path: Path, transition: str
) -> None:
    """No planner: Ctrl-C in the wait for its lifecycle service ends the command as
    the other commands end (no KeyboardInterrupt traceback out of rclpy, not -2)."""
    command = subprocess.Popen(
        [PYTHON, "-m", "timely_ros.cli", "lifecycle", transition, "--wait", "300"],
        cwd=REPO,
        env=ros_env(tmp_path / "ros_log"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:  # its node is up: it waits for the planner's service
        names = ros_client.node.get_node_names
        wait_until(
            lambda: "timely_lifecycle_cli" in names() or command.poll() is not None,
            60,
            "the command's node",
        )
        command.send_signal(signal.SIGINT)
        out, err = command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
    assert command.returncode == 130, out + err
    assert "Traceback" not in err and not out, out + err
