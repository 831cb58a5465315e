"""`timely demo` (what `make run` runs): planner and simulated fleet composed in one
process, a short WID 1-style workload through PlanTask goals, the lrtrace table."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.timely_ros.ros_support import PYTHON, REPO, ros_env

pytestmark = pytest.mark.ros


def test_demo_replays_a_short_workload(tmp_path: Path) -> None:
    done = subprocess.run(
        [PYTHON, "-m", "timely_ros.cli", "demo", "--duration", "8", "--seed", "7"],
        cwd=REPO,
        env=ros_env(tmp_path / "ros_log"),
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    found = re.search(r"replaying (\d+) tasks", out)
    assert found is not None, out
    n = int(found.group(1))
    assert n >= 3
    assert f"{n}/{n} tasks succeeded" in out
    assert "LRTrace WID1-short (ROS 2)" in out
    # one row per task class and the overall row, with utility/response/waiting
    assert re.search(r"│ timely\s+│ all\s+│\s+" + f"{n}/{n}", out)
    assert all(col in out for col in ("util", "resp", "wait"))
    assert len(re.findall(r"on (?:drone|arm)\d+: ok", out)) == n


def test_ctrl_c_stops_the_demo_cleanly(tmp_path: Path) -> None:
    """Ctrl-C once the first task ended: the goals still running are cancelled, the
    partial table printed, exit status 130, and no thread dies on a shut-down
    context (rclpy's own handler used to shut it down under the running nodes)."""
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [PYTHON, "-m", "timely_ros.cli", "demo", "--duration", "20", "--seed", "7"],
            cwd=REPO,
            env=ros_env(tmp_path / "ros_log"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            while not re.search(r"on (?:drone|arm)\d+: (?:ok|FAILED)", log.read_text()):
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 130, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
    text = log.read_text()
    assert "Traceback" not in text and "context is invalid" not in text, text[-3000:]
    stopped = re.search(r"timely demo: stopped \(SIGINT\): (\d+) of (\d+) tasks had ended", text)
    assert stopped is not None, text[-3000:]
    assert 1 <= int(stopped.group(1)) < int(stopped.group(2))
    assert "LRTrace WID1-short (ROS 2)" in text
