"""The planner and ten simulated robots in separate processes; mixed urgent and normal
LRTrace tasks through real PlanTask goals. Every goal ends, segments arrive in order,
and each robot executes exactly the skills of its own plan (read from the robot
process's own log). Also: a goal with an invalid field is rejected with its reason,
a robot without an executor gets a clear error after the bounded wait, and a robot
that aborts a segment ends its PlanTask with the robot's reason."""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    executor_entry,
    lrtrace_goal_fields,
    planner_checkpoint,
    planner_entry,
    wait_until,
)

pytestmark = pytest.mark.ros

FLEET = {  # robot -> LRTrace task (6, 7, 8 are the urgent ones)
    "drone1": 1,
    "drone2": 6,
    "drone3": 2,
    "drone4": 7,
    "drone5": 3,
    "drone6": 8,
    "drone7": 4,
    "arm1": 9,
    "arm2": 10,
    "arm3": 11,
}


def _type(robot: str) -> str:
    return "arm" if robot.startswith("arm") else "drone"


def test_ten_robots_mixed_urgency(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_interfaces.msg import Segment as SegmentMsg
    from timely_interfaces.msg import ServiceStatus
    from timely_ros.plan_client import PlanClient, make_goal
    from timely_ros.qos import TOPIC

    robots = {r: _type(r) for r in FLEET} | {"ghost1": "drone", "mismatch1": "drone"}
    planner = planner_entry(
        robots,
        engine="simulated",
        model_path=str(planner_checkpoint(tmp_path)),
        kv_budget_mb=4096.0,
        executor_wait_s=10.0,  # discovery of all the executors can take seconds on CI
        status_period_s=0.5,
    )
    executors: dict[str, Any] = {}
    for robot in FLEET:
        backend = "sim-arm" if _type(robot) == "arm" else "sim-drone"
        executors |= executor_entry(robot, backend, time_scale=0.05, seed=3)
    executors |= executor_entry("mismatch1", "sim-arm", time_scale=0.05)  # cannot fly
    robots_proc = node_processes(executors, "executors", "robots")
    planner_proc = node_processes(planner, "planner", "planner")

    statuses: list[ServiceStatus] = []
    ros_client.node.create_subscription(ServiceStatus, "/timely/status", statuses.append, TOPIC)
    published: list[SegmentMsg] = []
    ros_client.node.create_subscription(SegmentMsg, "/timely/segments", published.append, TOPIC)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner_proc.output()
    robots_proc.wait_for_output(r"robot arm3: sim-arm executor ready", 60)
    robots_proc.wait_for_output(r"robot mismatch1: sim-arm executor ready", 60)

    calls = {}
    for robot, trace_id in FLEET.items():
        f = lrtrace_goal_fields(trace_id)
        calls[robot] = client.send(
            make_goal(robot, f["instruction"], urgency=f["urgency"], scene=f["scene"])
        )
    f1 = lrtrace_goal_fields(1)
    ghost = client.send(make_goal("ghost1", f1["instruction"], scene=f1["scene"]))
    mismatch = client.send(make_goal("mismatch1", f1["instruction"], scene=f1["scene"]))
    invalid_goal = make_goal("drone1", f1["instruction"], urgency="asap", scene=f1["scene"])
    invalid = client.send(invalid_goal)

    for robot, call in [*calls.items(), ("ghost1", ghost), ("mismatch1", mismatch)]:
        assert call.done.wait(120), f"{robot} never ended\n{planner_proc.output()[-3000:]}"
    assert invalid.done.wait(30)

    # every goal ended; segments in order; the plan is the concatenation of segments
    for robot, call in calls.items():
        result = call.final_result()
        assert call.status == GoalStatus.STATUS_SUCCEEDED, (robot, result.error)
        indices = [s.index for s in call.segments]
        assert indices == list(range(result.segment_count)), (robot, indices)
        # only the last segment may say it is final (the service learns that a plan
        # ended only at EOS, after its last statement was already dispatched)
        assert not any(s.final for s in call.segments[:-1])
        assert "".join(s.text for s in call.segments) == result.plan
        assert result.plan == lrtrace_goal_fields(FLEET[robot])["plan"]
        assert all(s.robot_id == robot for s in call.segments)
        assert len({s.task_id for s in call.segments}) == 1
        assert result.response_time_s > 0 and 0 <= result.utility <= 2.0

    # /timely/segments carries the same segments as the feedback
    for robot, call in calls.items():
        task_id = call.segments[0].task_id
        on_topic = [(m.index, m.text) for m in published if m.task_id == task_id]
        assert on_topic == [(m.index, m.text) for m in call.segments], robot

    # each robot executed exactly its own plan's skills, segment by segment
    wait_until(
        lambda: (
            robots_proc.output().count("event=segment_executed")
            >= sum(len(c.segments) for c in calls.values())
        ),
        10,
        "the robots' logs",
    )
    executed: dict[str, list[tuple[str, int, list[str]]]] = {}
    pattern = r"event=segment_executed robot=(\w+) task=(\S+) segment=(\d+) skills=(\[.*\])"
    for m in re.finditer(pattern, robots_proc.output()):
        executed.setdefault(m.group(1), []).append(
            (m.group(2), int(m.group(3)), json.loads(m.group(4)))
        )
    for robot, call in calls.items():
        task_id = call.segments[0].task_id
        expected = [(task_id, s.index, [k.raw_text for k in s.skills]) for s in call.segments]
        assert executed[robot] == expected, robot

    # a robot without an executor: clear error after the bounded wait
    assert ghost.status == GoalStatus.STATUS_ABORTED
    assert "/ghost1/execute_skill not available after 10 s" in ghost.final_result().error
    # a robot that aborts: the PlanTask ends with the robot's reason
    assert mismatch.status == GoalStatus.STATUS_ABORTED
    assert "robot mismatch1 aborted segment 0" in mismatch.final_result().error
    assert "skill 'sw': unknown skill for a arm" in mismatch.final_result().error
    # an invalid field is rejected at goal time, with its reason published
    assert invalid.accepted is False
    assert "urgency 'asap'" in client.rejection_reason(invalid_goal)

    # /timely/status at least once a second, counting what happened
    def settled() -> bool:  # every goal has ended, so the service is idle again
        return (
            len(statuses) >= 3
            and statuses[-1].tasks_completed >= 10
            and statuses[-1].running_generations == 0
        )

    wait_until(settled, 30, "status of an idle service")
    stamps = [s.stamp.sec + s.stamp.nanosec * 1e-9 for s in statuses]
    # configured at 2 Hz: on average at least 1 Hz, and never silent for long (a
    # loaded machine may hold the timer up a few seconds)
    assert (len(stamps) - 1) / (stamps[-1] - stamps[0]) >= 1.0
    assert max(b - a for a, b in itertools.pairwise(stamps)) <= 5.0
    last = statuses[-1]
    assert last.tasks_completed >= 10 and last.tasks_rejected >= 1
    assert last.running_generations == 0 and last.policy == "timely"
    assert last.engine == "simulated"
    time.sleep(0)  # keep the client spinning until here
