"""Two minimal ROS 2 peers for the interface round-trip test, each run as its own
process: `planner` serves PlanTask and calls the robot's ExecuteSkill; `robot`
serves ExecuteSkill and sends one PlanTask goal, then prints what it saw as JSON."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import rclpy
from rclpy.action import ActionClient, ActionServer
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from timely_interfaces.action import ExecuteSkill, PlanTask
from timely_interfaces.msg import Segment, Skill

PLAN = "tu(90);mf(120);"
SKILLS = [("turn_cw", ["90"], "tu(90)"), ("move_forward", ["120"], "mf(120)")]
FEEDBACK_TOPIC = "/timely/plan_task/_action/feedback"


class PlannerPeer(Node):
    """Serves PlanTask: sends one ExecuteSkill goal, relays it as feedback, returns."""

    def __init__(self) -> None:
        super().__init__("roundtrip_planner")
        group = ReentrantCallbackGroup()
        self._skill_client: ActionClient[Any, Any, Any] = ActionClient(
            self, ExecuteSkill, "/robot1/execute_skill", callback_group=group
        )
        self._server = ActionServer(
            self, PlanTask, "/timely/plan_task", self._execute, callback_group=group
        )

    def _execute(self, goal_handle: ServerGoalHandle) -> PlanTask.Result:
        goal = goal_handle.request
        skills = [Skill(name=n, args=a, raw_text=r) for n, a, r in SKILLS]
        segment = Segment(
            task_id="t1",
            robot_id=goal.robot_id,
            index=0,
            skills=skills,
            text=PLAN,
            estimated_execution_s=1.5,
            final=True,
        )
        segment.stamp = self.get_clock().now().to_msg()
        feedback = PlanTask.Feedback()
        feedback.segment = segment
        # the client found the action's services, maybe not yet this feedback topic
        # (volatile: a message sent before discovery is lost)
        deadline = time.monotonic() + 10.0
        while self.count_subscribers(FEEDBACK_TOPIC) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        goal_handle.publish_feedback(feedback)

        result = PlanTask.Result()
        if not self._skill_client.wait_for_server(timeout_sec=20.0):
            goal_handle.abort()
            result.error = "robot1 executor not up"
            return result
        skill_goal = ExecuteSkill.Goal(task_id="t1", segment_index=0, skills=skills)
        done = threading.Event()
        outcome: dict[str, ExecuteSkill.Result] = {}

        def on_result(future: object) -> None:
            outcome["result"] = future.result().result  # type: ignore[attr-defined]
            done.set()

        def on_goal(future: object) -> None:
            future.result().get_result_async().add_done_callback(on_result)  # type: ignore[attr-defined]

        self._skill_client.send_goal_async(skill_goal).add_done_callback(on_goal)
        done.wait(timeout=20.0)
        skill_result = outcome.get("result")
        result.success = bool(skill_result and skill_result.success)
        result.plan = PLAN + (skill_result.return_value if skill_result else "")
        result.segment_count = 1
        result.response_time_s = 0.1
        goal_handle.succeed()
        return result


class RobotPeer(Node):
    """Serves ExecuteSkill (reports progress), sends one PlanTask goal."""

    def __init__(self) -> None:
        super().__init__("roundtrip_robot")
        group = ReentrantCallbackGroup()
        self.executed: list[str] = []
        self.progress: list[float] = []
        self._server = ActionServer(
            self, ExecuteSkill, "/robot1/execute_skill", self._execute, callback_group=group
        )
        self.client: ActionClient[Any, Any, Any] = ActionClient(
            self, PlanTask, "/timely/plan_task", callback_group=group
        )

    def _execute(self, goal_handle: ServerGoalHandle) -> ExecuteSkill.Result:
        skills = goal_handle.request.skills
        for i, skill in enumerate(skills):
            self.executed.append(f"{skill.name}({','.join(skill.args)})")
            feedback = ExecuteSkill.Feedback(
                progress=(i + 1) / len(skills), current_skill=skill.name
            )
            self.progress.append(feedback.progress)
            goal_handle.publish_feedback(feedback)
        goal_handle.succeed()
        return ExecuteSkill.Result(success=True, message="ok", return_value="#done")


def run_planner() -> None:
    rclpy.init()
    node = PlannerPeer()
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    print("ready", flush=True)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def run_robot() -> None:
    rclpy.init()
    node = RobotPeer()
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    report: dict[str, object] = {"feedback": []}
    try:
        if not node.client.wait_for_server(timeout_sec=30.0):
            raise SystemExit("PlanTask server never appeared")
        goal = PlanTask.Goal(
            robot_id="robot1",
            robot_type="drone",
            instruction="find the cat",
            urgency="urgent",
            dispatch=True,
        )

        def on_feedback(msg: PlanTask.Impl.FeedbackMessage) -> None:
            seg = msg.feedback.segment
            report["feedback"].append(  # type: ignore[attr-defined]
                {"index": seg.index, "text": seg.text, "skills": [s.name for s in seg.skills]}
            )

        send = node.client.send_goal_async(goal, feedback_callback=on_feedback)
        done = threading.Event()
        send.add_done_callback(lambda _f: done.set())
        if not done.wait(30.0):
            raise SystemExit("goal not answered")
        handle = send.result()
        assert handle is not None
        report["accepted"] = handle.accepted
        result_future = handle.get_result_async()
        finished = threading.Event()
        result_future.add_done_callback(lambda _f: finished.set())
        if not finished.wait(30.0):
            raise SystemExit("no result")
        response = result_future.result()
        assert response is not None
        result = response.result
        report.update(
            success=result.success,
            plan=result.plan,
            segments=result.segment_count,
            executed=node.executed,
            progress=node.progress,
        )
        print(json.dumps(report), flush=True)
    finally:
        executor.shutdown()
        # Out of spin() before teardown: a daemon thread still inside the executor's
        # C++ wait when the interpreter exits aborts the process ("terminate called
        # without an active exception", exit -6), as a CI run saw once.
        spin.join(timeout=10.0)
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    {"planner": run_planner, "robot": run_robot}[sys.argv[1]]()
