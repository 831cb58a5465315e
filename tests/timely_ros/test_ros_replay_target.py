"""`lrtrace replay --target ros` (timely_ros.replay_target) interrupted by Ctrl-C:
the goals it sent are cancelled, so no robot goes on with a replay that ended."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    PYTHON,
    REPO,
    StartNodes,
    executor_entry,
    ros_env,
    sim_planner_entry,
)

pytestmark = pytest.mark.ros


def _arm_trace(path: Path) -> None:
    """Arm tasks only (LRTrace 9-11: long plans), one at a time on arm1."""
    from lrtrace import trace_format
    from lrtrace.catalog import load_catalog
    from lrtrace.compose import compose
    from lrtrace.workload import WorkloadSpec

    spec = WorkloadSpec(
        name="arm only", eps=0.5, max_tpe=1, trace_ids=(9, 10, 11), agents=1, duration_s=8.0
    )
    trace_format.write(compose(spec, load_catalog()), path)


def test_ctrl_c_cancels_the_goals_the_replay_sent(
    tmp_path: Path, node_processes: StartNodes
) -> None:
    trace = tmp_path / "arm.lrt"
    _arm_trace(trace)
    nodes = node_processes(
        sim_planner_entry(tmp_path) | executor_entry("arm1", "sim-arm", time_scale=1.0), "all"
    )
    nodes.wait_for_output("timely up: 2 node", 60)
    log = tmp_path / "replay.log"
    args = ["replay", str(trace), "--target", "ros", "--policy", "timely"]
    with log.open("w") as out:
        replay = subprocess.Popen(
            [PYTHON, "-m", "lrtrace", *args, "-o", str(tmp_path / "out.json")],
            cwd=REPO,
            env=ros_env(tmp_path / "ros_log"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            nodes.wait_for_output(r"event=segment_started robot=arm1", 90)
            replay.send_signal(signal.SIGINT)
            assert replay.wait(timeout=60) == 130, log.read_text()[-3000:]
        finally:
            if replay.poll() is None:
                replay.kill()
    assert "interrupted" in log.read_text()
    nodes.wait_for_output(r"event=cancel_received robot=arm1", 30)
    started = nodes.output().count("event=segment_started robot=arm1")
    time.sleep(3)  # nothing of the cancelled plan starts afterwards
    assert nodes.output().count("event=segment_started robot=arm1") == started
