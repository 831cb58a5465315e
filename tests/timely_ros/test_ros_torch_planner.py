"""End to end on the real engine: the planner node runs the shipped planner
checkpoint on the torch engine; a drone and an arm (simulated executors, separate
process) receive and execute the plans it writes, segment by segment."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    executor_entry,
    lrtrace_goal_fields,
    planner_entry,
    timely_cli,
    wait_until,
)

pytestmark = [pytest.mark.ros, pytest.mark.slow]

GOALS = {"drone1": 7, "drone2": 1, "arm1": 9}  # urgent drone, normal drone, arm


def test_torch_planner_end_to_end(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    from robot_models.checkpoints import default_planner_path

    # the shipped checkpoint; TIMELY_PLANNER_CHECKPOINT points at another training run
    path = Path(os.environ.get("TIMELY_PLANNER_CHECKPOINT", default_planner_path()))
    if not (path / "model.safetensors").is_file():
        pytest.fail(f"the planner checkpoint is missing at {path}: python -m robot_models.train")
    planner = planner_entry(
        {"drone1": "drone", "drone2": "drone", "arm1": "arm"},
        engine="torch",
        model_path=str(path),
        kv_budget_mb=64.0,
    )
    executors = (
        executor_entry("drone1", "sim-drone", time_scale=0.05)
        | executor_entry("drone2", "sim-drone", time_scale=0.05)
        | executor_entry("arm1", "sim-arm", time_scale=0.05)
    )
    robots = node_processes(executors, "executors", "robots")
    planner_proc = node_processes(planner, "planner", "planner")
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(120), planner_proc.output()
    robots.wait_for_output("robot arm1: sim-arm executor ready", 60)

    calls = {}
    for robot, trace_id in GOALS.items():
        task = lrtrace_goal_fields(trace_id)
        calls[robot] = client.send(
            make_goal(robot, task["instruction"], urgency=task["urgency"], scene=task["scene"])
        )
    for robot, call in calls.items():
        assert call.done.wait(180), f"{robot}: no result\n{planner_proc.output()[-3000:]}"
        result = call.final_result()
        assert call.status == GoalStatus.STATUS_SUCCEEDED, (robot, result.error)
        assert [s.index for s in call.segments] == list(range(result.segment_count))
        assert "".join(s.text for s in call.segments) == result.plan
        assert result.segment_count >= 1 and result.response_time_s > 0

    # the robots executed exactly the segments the planner wrote for them
    total = sum(len(c.segments) for c in calls.values())
    wait_until(lambda: robots.output().count("event=segment_executed") >= total, 30, "robot logs")
    pattern = r"event=segment_executed robot=(\w+) task=\S+ segment=(\d+) skills=(\[.*\])"
    executed: dict[str, list[list[str]]] = {}
    for m in re.finditer(pattern, robots.output()):
        executed.setdefault(m.group(1), []).append(json.loads(m.group(3)))
    for robot, call in calls.items():
        assert executed[robot] == [[k.raw_text for k in s.skills] for s in call.segments]

    # `timely plan` without --scene says when its robot had none to plan in
    bare = timely_cli(tmp_path, "plan", "--robot", "drone2", "--no-dispatch", "fly up 1 meter")
    assert bare.returncode in (0, 1) and "plan" in bare.stdout + bare.stderr, bare.stderr
    assert "drone2 has no scene (none given with --scene" in bare.stderr, bare.stderr
    published = timely_cli(tmp_path, "scene", "--robot", "drone1", "visible: sofa, table")
    assert published.returncode == 0, published.stderr
    seen = timely_cli(tmp_path, "plan", "--robot", "drone1", "--no-dispatch", "fly up 1 meter")
    assert seen.returncode in (0, 1) and "has no scene" not in seen.stderr, seen.stderr
