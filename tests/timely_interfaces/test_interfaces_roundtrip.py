"""The generated interfaces work across processes over Fast DDS shared memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PEERS = Path(__file__).with_name("roundtrip_peers.py")


def _ros_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        FASTDDS_BUILTIN_TRANSPORTS="SHM",
        ROS_DOMAIN_ID=str(100 + os.getpid() % 100),
        ROS_LOG_DIR=str(tmp_path / "ros_log"),
        RMW_IMPLEMENTATION="rmw_fastrtps_cpp",
    )
    return env


@pytest.mark.ros
def test_plan_task_and_execute_skill_round_trip(tmp_path: Path) -> None:
    env = _ros_env(tmp_path)
    planner = subprocess.Popen(
        [sys.executable, str(PEERS), "planner"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert planner.stdout is not None
        assert planner.stdout.readline().strip() == "ready"
        robot = subprocess.run(
            [sys.executable, str(PEERS), "robot"],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert robot.returncode == 0, robot.stderr[-2000:]
        report = json.loads(robot.stdout.strip().splitlines()[-1])
    finally:
        planner.terminate()
        planner.wait(timeout=20)

    assert report["accepted"] is True
    assert report["feedback"] == [
        {"index": 0, "text": "tu(90);mf(120);", "skills": ["turn_cw", "move_forward"]}
    ]
    assert report["executed"] == ["turn_cw(90)", "move_forward(120)"]
    assert report["progress"] == [0.5, 1.0]
    assert report["success"] is True
    assert report["plan"] == "tu(90);mf(120);#done"
    assert report["segments"] == 1
