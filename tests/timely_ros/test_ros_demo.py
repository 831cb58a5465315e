"""`timely demo` (what `make run` runs): planner and simulated fleet composed in one
process, a short WID 1-style workload through PlanTask goals, the lrtrace table."""

from __future__ import annotations

import re
import subprocess
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
