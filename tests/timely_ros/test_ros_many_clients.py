"""100 PlanTask clients in 5 processes send their goals at the same instant, so their
results come in bursts: every one gets all its feedback and its result, none is
left waiting (the classic actionlib failure of results for many clients in a short
span, with shallow QoS queues), no goal is lost or duplicated."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    PYTHON,
    REPO,
    StartNodes,
    planner_checkpoint,
    planner_entry,
    ros_env,
)

pytestmark = pytest.mark.ros

PROCESSES = 5
CLIENTS = 20
ROBOTS = 10


def test_a_hundred_clients_in_five_processes(node_processes: StartNodes, tmp_path: Path) -> None:
    from action_msgs.msg import GoalStatus

    robots = {f"drone{i + 1}": "drone" for i in range(ROBOTS)}
    planner = planner_entry(
        robots,
        engine="simulated",
        model_path=str(planner_checkpoint(tmp_path)),
        kv_budget_mb=4096.0,
        max_active_goals=PROCESSES * CLIENTS,  # every goal at once (default 64)
    )
    planner_proc = node_processes(planner, "planner", "planner")
    planner_proc.wait_for_output("planner up", 60)
    start = time.monotonic() + 8.0  # time for the clients to start and discover the server
    outs = [tmp_path / f"burst{p}.json" for p in range(PROCESSES)]
    procs = [
        subprocess.Popen(
            [
                PYTHON,
                "-m",
                "tests.timely_ros.burst_clients",
                str(out),
                f"{start:.6f}",
                str(CLIENTS),
                "drone",
                str(ROBOTS),
                str(p * CLIENTS),
            ],
            cwd=REPO,
            env=ros_env(tmp_path / "ros_log"),
        )
        for p, out in enumerate(outs)
    ]
    try:
        for proc in procs:
            assert proc.wait(timeout=150) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)

    records = [r for out in outs for r in json.loads(out.read_text())]
    assert len(records) == PROCESSES * CLIENTS
    for r in records:
        assert r["accepted"] is True, r
        assert r["status"] == GoalStatus.STATUS_SUCCEEDED and r["success"], r
        # every feedback arrived, once, in order
        assert r["indices"] == list(range(r["segment_count"])), r
        assert len(r["task_ids"]) == 1, r
    task_ids = [r["task_ids"][0] for r in records]
    assert len(set(task_ids)) == len(task_ids)  # no goal lost or duplicated
    sent = min(r["sent_at"] for r in records)
    finished = [r["finished_at"] for r in records]
    spread = max(finished) - min(finished)
    last = max(finished) - sent
    print(f"{len(records)} clients: results within {spread:.2f} s, last {last:.2f} s after")
    assert max(finished) - sent < 60.0  # bounded by the test's wait: none left waiting
