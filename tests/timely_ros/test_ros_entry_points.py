"""The nodes' own entry points with `--params-file` (what the launch files run; the
planner's stops once shut down), the `timely plan` client, and `timely up` stopping
cleanly on Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.timely_ros.ros_support import (
    PYTHON,
    REPO,
    StartNodes,
    executor_entry,
    lrtrace_goal_fields,
    planner_checkpoint,
    planner_entry,
    ros_env,
    sim_planner_entry,
)

pytestmark = pytest.mark.ros


def _start(args: list[str], tmp: Path, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp / f"{name}.log"
    proc = subprocess.Popen(
        [PYTHON, *args],
        cwd=REPO,
        env=ros_env(tmp / "ros_log"),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    return proc, log


def _run(tmp: Path, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in the repository, with the tests' ROS environment."""
    return subprocess.run(
        [PYTHON, *args],
        cwd=REPO,
        env=ros_env(tmp / "ros_log"),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def _plan(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(tmp, "-m", "timely_ros.cli", "plan", "--wait", "60", *args, timeout_s=120)


def test_params_file_entry_points_and_plan_cli(tmp_path: Path) -> None:
    config = planner_entry(
        {"drone1": "drone"},
        engine="simulated",
        model_path=str(planner_checkpoint(tmp_path)),
        kv_budget_mb=4096.0,
    ) | executor_entry("drone1", "sim-drone", time_scale=0.05)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    params = ["--ros-args", "--params-file", str(path)]
    planner, planner_log = _start(["-m", "timely_ros.planner_node", *params], tmp_path, "planner")
    robot, robot_log = _start(
        [
            "-m",
            "timely_ros.skill_executor_node",
            "--ros-args",
            "-r",
            "__ns:=/drone1",
            "--params-file",
            str(path),
        ],
        tmp_path,
        "robot",
    )
    try:
        task = lrtrace_goal_fields(8)  # urgent: the dog chase, three segments
        done = _plan(
            tmp_path, "--robot", "drone1", "--urgent", "--scene", task["scene"], task["instruction"]
        )
        assert done.returncode == 0, done.stderr + planner_log.read_text()
        lines = done.stdout.splitlines()
        # the last segment is marked final when the planner could know (docs/service-api.md)
        assert [line.replace(" (final)", "") for line in lines[:3]] == [
            "segment 0: move_up(150)",
            "segment 1: turn_cw(180)",
            "segment 2: move_forward(200)",
        ]
        assert "(final)" not in "".join(lines[:2])
        assert f"plan: {task['plan']}" in lines and "segments 3" in done.stdout
        # its own time-utility: 3 while the first action starts within 30 s
        own = _plan(tmp_path, "--robot", "drone1", "--respond-within", "30", "--utility", "3",
                    "--no-dispatch", "--scene", task["scene"], task["instruction"])  # fmt: skip
        assert own.returncode == 0, own.stderr
        assert "utility 3.000" in own.stdout, own.stdout
        rejected = _plan(tmp_path, "--robot", "drone7", "find the cat")
        assert rejected.returncode == 2
        assert "rejected: robot_id 'drone7' is not served" in rejected.stderr
        assert "event=segment_executed robot=drone1" in robot_log.read_text()
        # a lifecycle shutdown ends the planner's process: it would serve nothing more
        shutdown = _run(tmp_path, "-m", "timely_ros.cli", "lifecycle", "shutdown", "--wait", "60")
        assert shutdown.stdout.strip().endswith("active -> finalized"), shutdown.stderr
        assert planner.wait(timeout=30) == 0, planner_log.read_text()
        assert "the planner was shut down (lifecycle); stopping" in planner_log.read_text()
    finally:
        for proc in (planner, robot):
            proc.send_signal(signal.SIGINT)
        codes = [proc.wait(timeout=20) for proc in (planner, robot)]
    assert codes == [0, 0]


def test_the_planner_entry_point_stops_cleanly_on_ctrl_c_during_a_goal(tmp_path: Path) -> None:
    """Ctrl-C while a robot executes a plan: the goal is ended and its client told
    why, then the node is destroyed (not under the goal's thread, which used to die
    publishing on destroyed handles), exit status 0."""
    config = sim_planner_entry(tmp_path) | executor_entry("arm1", "sim-arm", time_scale=1.0)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    params = ["--ros-args", "--params-file", str(path)]
    planner, planner_log = _start(["-m", "timely_ros.planner_node", *params], tmp_path, "planner")
    robot, robot_log = _start(
        ["-m", "timely_ros.skill_executor_node", "--ros-args", "-r", "__ns:=/arm1", *params[1:]],
        tmp_path,
        "robot",
    )
    task = lrtrace_goal_fields(9)  # an arm plan of many segments
    goal = ["--robot", "arm1", "--wait", "60", "--scene", task["scene"], task["instruction"]]
    plan = subprocess.Popen(
        [PYTHON, "-m", "timely_ros.cli", "plan", *goal],
        cwd=REPO,
        env=ros_env(tmp_path / "ros_log"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while "event=segment_started robot=arm1" not in robot_log.read_text():
            assert time.monotonic() < deadline and planner.poll() is None, planner_log.read_text()
            time.sleep(0.1)
        planner.send_signal(signal.SIGINT)
        assert planner.wait(timeout=30) == 0, planner_log.read_text()
        text = planner_log.read_text()
        assert "Traceback" not in text and "is shutting down" in text, text[-3000:]
        said, _ = plan.communicate(timeout=60)  # the client is told why, not left to
        assert plan.returncode == 1, said  # notice the planner's heartbeat stop
        assert "failed: planner /timely/timely_planner is shutting down" in said, said
    finally:
        for proc in (planner, robot, plan):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in (planner, robot, plan):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_timely_up_stops_cleanly_on_ctrl_c(node_processes: StartNodes) -> None:
    proc = node_processes(executor_entry("arm1", "sim-arm"), "all", "up")
    proc.wait_for_output("timely up: 1 node", 60)
    assert proc.stop() == 0, proc.output()
    assert "Traceback" not in proc.output()


def test_timely_up_stops_cleanly_on_ctrl_c_while_starting(node_processes: StartNodes) -> None:
    """Ctrl-C twice while the planner still loads its model (the executor is made
    first): the start-up completes and the nodes stop cleanly, no KeyboardInterrupt
    out of the middle of the start-up or the clean-up."""
    from robot_models.checkpoints import default_planner_path

    planner = planner_entry({"arm1": "arm"}, engine="torch", model_path=str(default_planner_path()))
    proc = node_processes(planner | executor_entry("arm1", "sim-arm"), "all", "up")
    proc.wait_for_output("robot arm1: sim-arm executor ready", 60)
    for _ in range(2):
        proc.proc.send_signal(signal.SIGINT)
    assert proc.proc.wait(timeout=60) == 0, proc.output()
    assert "Traceback" not in proc.output()
    assert "timely up: 2 node(s) running" in proc.output()  # the start-up was not torn


def test_ctrl_c_while_the_timely_command_starts_ends_it_without_a_traceback(
    tmp_path: Path,
) -> None:
    """The installed `timely` command, interrupted while it still imports (its first
    half second) or just after: status 130 (or killed by SIGINT before Python takes
    the signal), never a KeyboardInterrupt traceback."""
    timely = Path(PYTHON).parent / "timely"
    for delay_s in (0.1, 0.2, 0.35, 0.6):
        proc = subprocess.Popen(
            [str(timely), "status", "--wait", "30"],
            cwd=REPO,
            env=ros_env(tmp_path / "ros_log"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay_s)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode in (130, -signal.SIGINT), (delay_s, proc.returncode, err)
        assert "Traceback" not in err, (delay_s, err)


def test_timely_up_reports_a_bad_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"timely_planner": {"ros__parameters": {"robots": ["x"]}}}))
    done = _run(tmp_path, "-m", "timely_ros.cli", "up", str(bad))
    assert done.returncode == 2
    assert "robot 'x' is listed but has no settings" in done.stderr
    robots_only = tmp_path / "robots.yaml"  # --only planner would serve nothing, for ever
    robots_only.write_text(yaml.safe_dump(executor_entry("arm1", "sim-arm")))
    done = _run(tmp_path, "-m", "timely_ros.cli", "up", str(robots_only), "--only", "planner")
    assert done.returncode == 2 and "--only planner: the config has no planner node" in done.stderr


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"kv_budget_mb": -3.0}, "kv_budget_mb: Input should be greater than 0"),
        # empty lists (ROS 2 cannot type them) are read as the field's default, none:
        # the start-up goes on to the next problem
        (
            {"kv_budget_mb": -3.0, "vllm_server_urls": [], "drone1": {"tools": []}},
            "kv_budget_mb: Input should be greater than 0",
        ),
        ({"robots": []}, "'robots' must be a non-empty list of robot ids"),
    ],
)
def test_a_node_entry_point_reports_bad_parameters_in_one_line(
    tmp_path: Path, params: dict[str, object], message: str
) -> None:
    config = planner_entry({"drone1": "drone"})
    body = config["/**/timely_planner"]["ros__parameters"]
    for key, value in params.items():
        body[key] = {**body[key], **value} if isinstance(value, dict) else value
    path = tmp_path / "planner.yaml"
    path.write_text(yaml.safe_dump(config))
    done = _run(tmp_path, "-m", "timely_ros.planner_node", "--ros-args", "--params-file", str(path))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "bad topic!", "a cat"], "--topic 'bad topic!' is not a valid topic name"),
        (["a \u202e cat"], "scene: Value error, invisible format character U+202E"),
    ],
)
def test_timely_scene_refuses_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = _run(tmp_path, "-m", "timely_ros.cli", "scene", "--robot", "drone1", *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
