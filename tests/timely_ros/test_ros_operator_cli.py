"""`timely status` and `timely cancel` against a running planner and robot (separate
processes), plus the status rendering and goal-id parsing on their own."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    CLI_WAIT_S,
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


def test_goal_ids_are_parsed_strictly() -> None:
    from timely_ros.cancel_cli import parse_goal_id

    assert parse_goal_id("00112233-4455-6677-8899-AABBCCDDEEFF").hex() == (
        "00112233445566778899aabbccddeeff"
    )
    for bad in ("", "zz", "0011", "00112233445566778899aabbccddeeff00"):
        with pytest.raises(ValueError, match="32 hex digits"):
            parse_goal_id(bad)
    with pytest.raises(ValueError, match="all zeros, which ROS reads as every goal"):
        parse_goal_id("0" * 32)  # the cancel service's every-goal id: that is --all


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--wait", "nan"],
        ["cancel", "--all", "--wait", "-1"],
        ["plan", "--robot", "d1", "--timeout", "0", "go"],
        ["demo", "--duration", "0"],
        ["demo", "--duration", "inf"],
    ],
)
def test_times_that_are_no_times_are_refused_before_anything_starts(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from timely_ros.cli import main

    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    assert "expected" in capsys.readouterr().err


def test_approve_lists_how_long_a_segment_has_waited_not_how_long_when_published() -> None:
    import time

    from timely_ros.approval_desk import ApprovalDesk
    from timely_ros.approve_cli import _describe

    published: list[list[dict[str, object]]] = []
    desk = ApprovalDesk(published.append)
    request = desk.open("arm1", "ab" * 16, "task-1", 2, "pk('knife');", ("near a person",))
    (summary,) = published[-1]
    assert summary["waiting_s"] == pytest.approx(0.0, abs=1.0)
    summary["opened_at"] = time.time() - 12.4  # the latched message, read 12 s later
    line = _describe(summary)
    assert f"{request.request_id}  robot arm1  segment 2" in line and "waiting for 12 s" in line


def test_status_renders_every_robot() -> None:
    from rich.console import Console
    from timely_interfaces.msg import ServiceStatus
    from timely_ros.status_cli import render

    msg = ServiceStatus(
        policy="timely", engine="torch", incarnation="abc123", queue_length=3,
        robot_ids=["drone1", "arm1"], robot_states=["executing segment 2", "idle"],
        robot_goal_ids=["ab" * 16, ""],
        robot_scenes=["visible: sofa,\n table", "on table: " + "cup, " * 20],
    )  # fmt: skip
    console = Console(record=True, width=200)
    console.print(render(msg))
    text = console.export_text()
    assert "planner abc123 (torch, timely)" in text
    # a robot's scene on one line, a long one cut
    assert "visible: sofa, table" in text and "on table: cup, cup," in text, text
    assert "cup, " * 20 not in text and "…" in text
    msg.robot_scenes = []  # a planner from before the field
    console = Console(record=True, width=200)
    console.print(render(msg))
    assert "none" in console.export_text()
    assert "executing segment 2" in text and "ab" * 16 in text and "idle" in text
    assert "plan candidates" not in text  # none configured
    msg.plan_candidates, msg.candidate_plans, msg.candidate_alternatives_kept = 8, 5, 2
    console = Console(record=True, width=200)
    console.print(render(msg))
    text = console.export_text()
    assert "plan candidates: 8 per plan" in text
    assert re.search(r"│\s*5\s*│\s*2\s*│\s*0\s*│", text), text  # decided, kept, again


@pytest.mark.ros
def test_status_and_cancel_from_the_command_line(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    robot, planner_proc = start_arm_and_planner(
        node_processes,
        tmp_path,
        time_scale=10.0,  # slow: the arm is still on a segment when `status` reports
        robots={"arm1": "arm", "drone1": "drone"},
        status_period_s=0.2,
    )
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner_proc.output()
    task = lrtrace_goal_fields(10)
    calls = [client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))]
    calls.append(client.send(make_goal("arm1", task["instruction"], scene=task["scene"])))
    # the goal that has the arm first streams its first segment; the other waits
    wait_until(lambda: any(c.segments for c in calls), 60, "a goal's first segment")
    # one goal at a time on the arm: the other waits for it
    running = robot.wait_for_output(r"event=segment_started robot=arm1 task=(\S+) ", 30)

    status = timely_cli(tmp_path, "status")
    assert status.returncode == 0, status.stderr
    assert re.search(r"executing segment \d+ \(\+1 more goals\)", status.stdout), status.stdout
    # the goal listed is the one whose goal thread started first
    assert any(c.goal_id in status.stdout for c in calls), status.stdout
    # drone1 has no executor up: not shown as if it were ready
    assert re.search(r"drone1\W+idle; no heartbeat from its executor yet", status.stdout)

    unknown = timely_cli(tmp_path, "cancel", "12" * 16)  # (all zeros means every goal)
    assert unknown.returncode == 1 and "no such goal" in unknown.stdout, unknown.stdout
    assert timely_cli(tmp_path, "cancel", "not-a-goal").returncode == 2

    cancel = timely_cli(tmp_path, "cancel", "--robot", "arm1")
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    for call in calls:
        assert call.done.wait(30)
        assert call.status == GoalStatus.STATUS_CANCELED, call.final_result().error
        assert call.goal_id in cancel.stdout
    robot.wait_for_output(rf"event=segment_cancelled robot=arm1 task={running.group(1)}", 20)
    # nothing left to cancel on arm1, and a robot the planner does not serve
    idle = timely_cli(tmp_path, "cancel", "--robot", "drone1")
    assert idle.returncode == 1 and "drone1: no goal to cancel" in idle.stdout, idle.stdout
    stranger = timely_cli(tmp_path, "cancel", "--robot", "drone9")
    assert stranger.returncode == 2 and "robot 'drone9' is not served" in stranger.stderr


def _plan_on_arm1(tmp_path: Path, options: list[str] | None = None) -> subprocess.Popen[str]:
    """`timely plan` of LRTrace task 10 for arm1, running (its output piped)."""
    task = lrtrace_goal_fields(10)
    args = ["plan", "--robot", "arm1", "--wait", CLI_WAIT_S, "--scene", task["scene"]]
    return subprocess.Popen(
        [PYTHON, "-m", "timely_ros.cli", *args, *(options or []), task["instruction"]],
        cwd=REPO,
        env=ros_env(tmp_path / "ros_log"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    ("stop", "detach"),
    [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["cancel", "detach", "sigterm"],
)
def test_ctrl_c_on_plan_cancels_its_goal_and_waits_for_the_robot_to_stop(
    node_processes: StartNodes, tmp_path: Path, stop: signal.Signals, detach: bool
) -> None:
    """Ctrl-C, or SIGTERM as `kill` and systemd send it, on `timely plan`: its goal
    is cancelled and the robot stopped before the command exits (128 + the signal's
    number); with --detach the goal runs on."""
    robot, planner_proc = start_arm_and_planner(
        node_processes,
        tmp_path,
        time_scale=10.0,  # slow: the arm is mid-segment at Ctrl-C
    )
    plan = _plan_on_arm1(tmp_path, ["--detach"] if detach else [])
    try:
        running = robot.wait_for_output(r"event=segment_started robot=arm1 task=(\S+) ", 90)
        plan.send_signal(stop)
        out, err = plan.communicate(timeout=60)
    finally:
        if plan.poll() is None:
            plan.kill()
    assert plan.returncode == 128 + stop, out + err
    assert "Traceback" not in err, err
    cancelled = f"event=segment_cancelled robot=arm1 task={running.group(1)}"
    if detach:  # the goal runs on: its robot is not stopped
        assert "keeps running" in err, err
        status = timely_cli(tmp_path, "status")
        assert re.search(r"arm1\W+executing", status.stdout), status.stdout
        assert cancelled not in robot.output()
        return
    assert "interrupted; cancelling goal" in err and "cancelled" in err.splitlines()[-1], err
    assert "accepted (timely cancel" in err, err
    # the robot stopped before the command returned, and the planner holds no goal for it
    assert cancelled in robot.output()
    status = timely_cli(tmp_path, "status")
    assert status.returncode == 0, status.stderr
    assert re.search(r"arm1\W+idle", status.stdout), status.stdout
    assert planner_proc.proc.poll() is None
    if stop == signal.SIGTERM:  # the other client commands stop quietly on it too
        watch = subprocess.Popen(
            [PYTHON, "-m", "timely_ros.cli", "status", "--watch", "--wait", CLI_WAIT_S],
            cwd=REPO,
            env=ros_env(tmp_path / "ros_log"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: _catches(watch.pid, signal.SIGTERM), 60, "status to take SIGTERM")
            watch.send_signal(signal.SIGTERM)
            _, err = watch.communicate(timeout=30)
        finally:
            if watch.poll() is None:
                watch.kill()
        assert watch.returncode in (0, 128 + signal.SIGTERM) and "Traceback" not in err, err


@pytest.mark.ros
def test_plan_says_whether_its_goal_was_accepted_and_who_cancelled_it(
    node_processes: StartNodes, tmp_path: Path
) -> None:
    """`timely plan` says its goal was accepted only once the planner accepted it (a
    rejected goal never reads as accepted), and a goal cancelled by another client
    is reported as that, not as this command's own cancel."""
    robot, _ = start_arm_and_planner(node_processes, tmp_path, time_scale=10.0)
    rejected = timely_cli(tmp_path, "plan", "--robot", "drone9", "fly up one meter")
    assert rejected.returncode == 2 and "rejected" in rejected.stderr, rejected.stderr
    assert "accepted" not in rejected.stderr, rejected.stderr
    plan = _plan_on_arm1(tmp_path)
    try:
        running = robot.wait_for_output(r"event=segment_started robot=arm1 task=(\S+) ", 90)
        cancel = timely_cli(tmp_path, "cancel", "--robot", "arm1")
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        out, err = plan.communicate(timeout=60)
    finally:
        if plan.poll() is None:
            plan.kill()
    assert plan.returncode == 1, out + err
    goal_id = re.search(r"goal ([0-9a-f]{32}) accepted \(timely cancel \1\)", err)
    assert goal_id is not None and goal_id.group(1) in cancel.stdout, err
    assert "cancelled by another client" in err.splitlines()[-1], err
    robot.wait_for_output(rf"event=segment_cancelled robot=arm1 task={running.group(1)}", 20)


def _catches(pid: int, sig: signal.Signals) -> bool:
    """The process has a handler of its own for `sig` (Linux: SigCgt in its status),
    so a signal sent now meets the command's handling, not the default action."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (int(sig) - 1) & 1)
    return False
