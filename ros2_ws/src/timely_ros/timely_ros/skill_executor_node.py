"""`timely_skill_executor`: the ExecuteSkill action server of one robot.

Modelled on rclpy's minimal action server. A goal is one segment: plan text, run
with the plan's semantics by a `SegmentRunner` (variables kept per task), or a bare
list of skill calls. Statements and calls are checked against the robot's skill set
before anything moves, so an unknown skill or a bad argument ends the goal with a
result naming it.
Segments of one robot run one at a time, in arrival order. The executor publishes
its heartbeat on `heartbeat` (in its namespace) and stops whatever it runs when the
planner stops responding or restarts (`liveness`): nothing moves for a task that
has ended.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.exceptions import InvalidTopicNameException
from rclpy.node import Node
from std_msgs.msg import String
from timely_interfaces.action import ExecuteSkill

from robot_models.errors import SkillValidationError
from robot_models.skills import Skill, SkillValue
from timely_ros.backends import Backend, SkillFailed, make_backend
from timely_ros.config import (
    EXECUTOR_NODE,
    ConfigError,
    ExecutorParams,
    executor_params,
    planner_names,
)
from timely_ros.goal_state import end_cancelled
from timely_ros.liveness import (
    Beat,
    LivenessWatch,
    new_incarnation,
    publish_heartbeats,
    watch_heartbeats,
)
from timely_ros.node_main import run_node
from timely_ros.node_params import node_parameters
from timely_ros.param_descriptors import declare_executor_parameters
from timely_ros.qos import LATEST, action_server_qos
from timely_ros.segment_runner import CallProgress, SegmentRunner, SegmentStopped
from timely_ros.skill_text import ArgumentError, parse_arg

PLANNER_CHECK_PERIOD_S = 0.1


class SkillExecutorNode(Node):
    def __init__(self, backend: Backend | None = None, **node_kwargs: Any) -> None:
        super().__init__(EXECUTOR_NODE, **node_kwargs)  # overrides: declare_executor_parameters
        declare_executor_parameters(self)
        raw = node_parameters(self)
        robot_id = str(raw.pop("robot_id", "") or self.get_namespace().strip("/"))
        self.params: ExecutorParams = executor_params(robot_id, raw)
        self._active: dict[bytes, threading.Event] = {}
        self.backend = backend or make_backend(self.params)
        self._runner = SegmentRunner(self.backend, self.params.robot_type)
        self._run_lock = threading.Lock()
        self._stop_reasons: dict[bytes, str] = {}  # segments stopped without a cancel
        self.incarnation = new_incarnation()
        publish_heartbeats(self, "heartbeat", self.params.robot_id, self.incarnation)
        self._planner = LivenessWatch(self.params.planner_timeout_s)
        if self.params.planner_timeout_s > 0:
            group = MutuallyExclusiveCallbackGroup()
            names = planner_names(self.params.planner_namespace)
            watch_heartbeats(self, names.absolute(names.heartbeat), self._on_planner_beat, group)
            self.create_timer(PLANNER_CHECK_PERIOD_S, self._check_planner, callback_group=group)
        self._server = ActionServer(
            self,
            ExecuteSkill,
            "execute_skill",
            self._execute,
            goal_callback=self._on_goal,
            cancel_callback=self._on_cancel,
            callback_group=ReentrantCallbackGroup(),
            **action_server_qos(),
        )
        if self.params.scene:
            self._publish_scene()
        self.get_logger().info(
            f"robot {self.params.robot_id}: {self.params.backend} executor ready "
            f"on {self.get_namespace().rstrip('/')}/execute_skill"
        )

    def _publish_scene(self) -> None:
        """Publish the configured scene now and every `scene_period_s`, as a perception
        pipeline would: a planner that starts later (the topic keeps no history) has it
        within a period, and one that has it already ignores a scene that did not change."""
        scene = String(data=self.params.scene)
        try:
            publisher = self.create_publisher(String, self.params.scene_topic_name, LATEST)
        except InvalidTopicNameException as err:
            raise ConfigError(
                f"scene_topic {self.params.scene_topic_name!r} is not a valid topic name ({err})"
            ) from None
        publisher.publish(scene)
        self.create_timer(self.params.scene_period_s, lambda: publisher.publish(scene))

    def _on_planner_beat(self, beat: Beat) -> None:
        _back, restarted = self._planner.beat(beat)
        if restarted:  # the tasks of the planner before are gone
            self._stop_all(f"planner {beat.source} restarted")

    def _check_planner(self) -> None:
        for source in self._planner.newly_gone():
            self._stop_all(
                f"planner {source} stopped responding (no heartbeat for "
                f"{self._planner.timeout_s:g} s)"
            )

    def _stop_all(self, reason: str) -> None:
        """Stop every running segment: its task cannot go on without its planner."""
        active = list(self._active.items())
        for key, stop in active:
            self._stop_reasons[key] = reason
            stop.set()
        if active:
            self.backend.halt()
        self.get_logger().warning(
            f"event=planner_lost robot={self.params.robot_id} reason={reason!r} "
            f"stopped={len(active)} mono={time.monotonic():.6f}"
        )

    def _on_goal(self, goal: ExecuteSkill.Goal) -> GoalResponse:
        return GoalResponse.ACCEPT  # bad skills end with a result that names them

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        stop = self._active.get(bytes(goal_handle.goal_id.uuid))
        if stop is not None:
            stop.set()
            self.backend.halt()
        self.get_logger().info(
            f"event=cancel_received robot={self.params.robot_id} "
            f"task={goal_handle.request.task_id} segment={goal_handle.request.segment_index} "
            f"mono={time.monotonic():.6f}"
        )
        return CancelResponse.ACCEPT

    def check(self, goal: ExecuteSkill.Goal) -> list[tuple[Skill, tuple[SkillValue, ...]]]:
        """Every call checked against the skill set; ValueError naming the first bad one."""
        calls = []
        for i, msg in enumerate(goal.skills):
            try:
                values = tuple(parse_arg(a) for a in msg.args)
                skill = self.backend.skill_set.validate_call(msg.name, values)
            except (SkillValidationError, ArgumentError) as err:
                raise ValueError(f"skill {i} ({msg.raw_text or msg.name}): {err}") from None
            calls.append((skill, values))
        return calls

    def _execute(self, goal_handle: ServerGoalHandle) -> ExecuteSkill.Result:
        goal: ExecuteSkill.Goal = goal_handle.request
        key = bytes(goal_handle.goal_id.uuid)
        stop = threading.Event()
        self._active[key] = stop
        if goal_handle.is_cancel_requested:  # cancelled before it got here: never start
            stop.set()
        try:
            return self._run(goal_handle, goal, stop, key)
        finally:
            self._active.pop(key, None)
            self._stop_reasons.pop(key, None)

    def _run(
        self,
        goal_handle: ServerGoalHandle,
        goal: ExecuteSkill.Goal,
        stop: threading.Event,
        key: bytes,
    ) -> ExecuteSkill.Result:
        robot = self.params.robot_id
        total = max(len(goal.skills), 1)

        def progress(index: int, fraction: float, status: str) -> None:
            done = min((index + min(max(fraction, 0.0), 1.0)) / total, 1.0)
            goal_handle.publish_feedback(ExecuteSkill.Feedback(progress=done, current_skill=status))

        try:
            with self._run_lock:
                if stop.is_set():  # cancelled while it waited for the robot
                    raise SegmentStopped
                self.get_logger().info(
                    f"event=segment_started robot={robot} task={goal.task_id} "
                    f"segment={goal.segment_index} mono={time.monotonic():.6f}"
                )
                if goal.text:
                    value = self._runner.run(
                        goal.task_id, goal.text, stop, progress, goal.segment_index
                    ).value
                else:
                    value = self._run_calls(self.check(goal), stop, progress)
        except SegmentStopped:
            pass
        except ValueError as err:  # syntax, unknown skill, bad argument, runtime error
            goal_handle.abort()
            return ExecuteSkill.Result(success=False, message=f"robot {robot}: {err}")
        except SkillFailed as err:
            goal_handle.abort()
            return ExecuteSkill.Result(success=False, message=f"robot {robot}, {err}")
        except Exception as err:  # a backend bug must still end the goal clearly
            self.get_logger().error(f"segment {goal.segment_index} failed: {err!r}")
            goal_handle.abort()
            return ExecuteSkill.Result(
                success=False, message=f"robot {robot}: {type(err).__name__}: {err}"
            )
        reason = self._stop_reasons.get(key)
        if reason is not None and not goal_handle.is_cancel_requested:
            goal_handle.abort()
            self.get_logger().info(
                f"event=segment_stopped robot={robot} task={goal.task_id} "
                f"segment={goal.segment_index} reason={reason!r} mono={time.monotonic():.6f}"
            )
            return ExecuteSkill.Result(success=False, message=f"robot {robot}: stopped: {reason}")
        if stop.is_set() or goal_handle.is_cancel_requested:
            end_cancelled(goal_handle)
            self.get_logger().info(
                f"event=segment_cancelled robot={robot} task={goal.task_id} "
                f"segment={goal.segment_index} mono={time.monotonic():.6f}"
            )
            return ExecuteSkill.Result(success=False, message=f"robot {robot}: cancelled, stopped")
        goal_handle.succeed()
        self.get_logger().info(
            f"event=segment_executed robot={robot} task={goal.task_id} "
            f"segment={goal.segment_index} skills={json.dumps([s.raw_text for s in goal.skills])} "
            f"mono={time.monotonic():.6f}"
        )
        return ExecuteSkill.Result(success=True, return_value=value)

    def _run_calls(
        self,
        calls: list[tuple[Skill, tuple[SkillValue, ...]]],
        stop: threading.Event,
        progress: CallProgress,
    ) -> str:
        """A goal without plan text: its calls in order (literal arguments only)."""
        value = ""
        for i, (skill, args) in enumerate(calls):
            if stop.is_set():
                raise SegmentStopped

            def call_progress(fraction: float, status: str, i: int = i) -> None:
                progress(i, fraction, status)

            try:
                value = self.backend.run(skill, args, stop, call_progress) or value
            except SkillFailed as err:
                raise SkillFailed(f"{skill.name}: {err}") from None
        return value

    def destroy_node(self) -> None:
        """Shutting down stops the robot: running segments end at once (Tello: hover),
        so the process exits promptly instead of finishing the segment first."""
        if hasattr(self, "backend"):  # not when its parameters were refused
            for stop in list(self._active.values()):
                stop.set()
            if self._active:
                self.backend.halt()
            self.backend.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Console entry: `timely_skill_executor --ros-args -r __ns:=/drone1 --params-file F`."""
    return run_node(SkillExecutorNode, args)


if __name__ == "__main__":
    sys.exit(main())
