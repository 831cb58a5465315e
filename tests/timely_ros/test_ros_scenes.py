"""A robot's scene on `<robot>/scene` (std_msgs/String, from any publisher, or
`timely scene`): a goal that carries no scene is planned in the robot's latest
one, and a scene that is not valid text is ignored, with its reason on
/timely/rejections. A goal whose prompt would be too long in tokens (though short
enough in characters) is rejected at goal time, naming the limit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.timely_ros.ros_support import (
    PYTHON,
    REPO,
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    executor_entry,
    lrtrace_goal_fields,
    planner_checkpoint,
    ros_env,
    sim_planner_entry,
    wait_until,
)

pytestmark = pytest.mark.ros


def test_a_goal_without_a_scene_plans_in_the_published_one(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus
    from std_msgs.msg import String
    from timely_ros.plan_client import PlanClient, make_goal
    from timely_ros.qos import TOPIC

    task = lrtrace_goal_fields(1)
    planner = {
        "timely_planner": {
            "ros__parameters": {
                "robots": ["drone1"],
                "drone1": {"type": "drone", "dispatch": False},
                "engine": "simulated",
                "model_path": str(planner_checkpoint(tmp_path)),
                "scene_debounce_s": 0.0,
                "kv_budget_mb": 4096.0,
            }
        }
    }
    planner_proc = node_processes(planner, "planner", "planner")
    node = ros_client.node
    rejections: list[dict[str, object]] = []
    node.create_subscription(
        String, "/timely/rejections", lambda m: rejections.append(json.loads(m.data)), TOPIC
    )
    scenes = node.create_publisher(String, "/drone1/scene", 1)
    client = PlanClient(node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner_proc.output()

    # the simulated planner knows a plan for this instruction only in its own scene:
    # a goal without a scene is accepted once the planner has the published one
    timer = node.create_timer(0.1, lambda: scenes.publish(String(data=task["scene"])))
    goal = make_goal("drone1", task["instruction"], urgency=task["urgency"], dispatch=False)
    calls = []

    def accepted() -> bool:
        call = client.send(goal)
        assert call.done.wait(30) or call.accepted, "no answer to the goal"
        calls.append(call)
        return bool(call.accepted)

    wait_until(accepted, 30, "a goal planned in the published scene")
    timer.cancel()
    call = calls[-1]
    assert call.done.wait(60), planner_proc.output()[-3000:]
    result = call.final_result()
    assert call.status == GoalStatus.STATUS_SUCCEEDED, result.error
    assert result.plan == task["plan"]

    # the operator's CLI: the next goal without a scene plans in the new one
    task2 = lrtrace_goal_fields(2)
    cli = subprocess.run(
        [
            PYTHON,
            "-m",
            "timely_ros.cli",
            "scene",
            "--robot",
            "drone1",
            "--wait",
            "30",
            task2["scene"],
        ],
        cwd=REPO,
        env=ros_env(tmp_path / "ros_log"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "published the scene of drone1 on /drone1/scene" in cli.stdout
    goal2 = make_goal("drone1", task2["instruction"], urgency=task2["urgency"], dispatch=False)
    call2 = client.send(goal2)
    assert call2.done.wait(60) and call2.accepted, client.rejection_reason(goal2)
    assert call2.final_result().plan == task2["plan"]
    bad = subprocess.run(
        [PYTHON, "-m", "timely_ros.cli", "scene", "--robot", "drone1", "a \u202e cat"],
        cwd=REPO,
        env=ros_env(tmp_path / "ros_log"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "U+202E" in bad.stderr

    # within the character limit, past the prompt's token limit: refused at goal time
    long_goal = make_goal("drone1", "\U0001f600" * 1900, urgency="normal", dispatch=False)
    call3 = client.send(long_goal)
    assert call3.done.wait(30) and call3.accepted is False
    assert "max_prompt_tokens" in client.rejection_reason(long_goal)

    scenes.publish(String(data="a sofa \u202e and a cat"))
    wait_until(lambda: any(r.get("scene_update") for r in rejections), 10, "the rejection")
    reason = next(r for r in rejections if r.get("scene_update"))
    assert reason["robot_id"] == "drone1" and "U+202E" in str(reason["reason"])
    planner_proc.wait_for_output(r"ignored scene of robot 'drone1'", 10)


def test_a_robot_that_reports_its_scene_has_its_goals_planned_in_it(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    """A simulated robot with a `scene` publishes it on /<id>/scene every
    `scene_period_s`, so a planner started after it still gets it, and a goal sent
    without a scene is planned in it (the simulated planner knows the plan only in
    that scene: without it the goal is rejected)."""
    from timely_interfaces.msg import ServiceStatus
    from timely_ros.plan_client import PlanClient, make_goal
    from timely_ros.qos import TOPIC

    task = lrtrace_goal_fields(3)
    robot = executor_entry(
        "drone1", "sim-drone", time_scale=0.05, scene=task["scene"], scene_period_s=0.2
    )
    robot_proc = node_processes(robot, "executors", "drone")
    robot_proc.wait_for_output("robot drone1: sim-drone executor ready", 60)
    planner_proc = node_processes(
        sim_planner_entry(tmp_path, {"drone1": "drone"}, scene_debounce_s=0.0),
        "planner",
        "planner",
    )
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner_proc.output()
    statuses: list[ServiceStatus] = []
    ros_client.node.create_subscription(ServiceStatus, "/timely/status", statuses.append, TOPIC)
    goal = make_goal("drone1", task["instruction"], urgency=task["urgency"])
    calls = []

    def accepted() -> bool:
        calls.append(client.send(goal))
        assert calls[-1].done.wait(30) or calls[-1].accepted, "no answer to the goal"
        return bool(calls[-1].accepted)

    wait_until(accepted, 30, "a goal planned in the robot's own scene")
    assert calls[-1].done.wait(60), planner_proc.output()[-3000:]
    result = calls[-1].final_result()
    assert result.success and result.plan == task["plan"], result.error
    robot_proc.wait_for_output(r"event=segment_executed robot=drone1 task=", 30)
    # the planner's status says what the robot's goals are planned in
    wait_until(lambda: bool(statuses), 10, "a status")
    assert list(statuses[-1].robot_ids) == ["drone1"]
    assert list(statuses[-1].robot_scenes) == [task["scene"]]
