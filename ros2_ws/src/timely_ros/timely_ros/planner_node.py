"""`timely_planner`: the PlanTask action server in front of the PlanningService.

Modelled on rclpy's minimal action server, as a managed (lifecycle) node: configure
loads the model and registers the robots, activate serves goals, deactivate drains
(new goals are rejected, active ones run to their end within `drain_timeout_s`),
cleanup unloads the model and stops the tool plugin processes configure started
(destroying or shutting the node down stops every one it holds). With `autostart`
(the default) it configures and activates itself at start-up; parameters are read
again at each configure.

Goals are checked in the goal callback
(an invalid field, or a robot that stopped responding, is rejected before any
planning, and the reason is published on /timely/rejections with the goal's id, and
logged). The planner publishes its heartbeat and incarnation (`liveness`) and
watches its robots' heartbeats (`robot_watch`). Each accepted goal runs as a `PlanJob` on its own
executor thread (reentrant group), so a goal waiting for its robot never blocks
another goal, the cancel callback, or the status timer (its own group).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import asdict, replace
from functools import partial
from typing import Any

from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from pydantic import ValidationError
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from std_msgs.msg import String
from timely_interfaces.action import PlanTask
from timely_interfaces.msg import Segment as SegmentMsg
from timely_interfaces.msg import ServiceStatus

from timely_core.errors import ServiceError
from timely_ros.approval_desk import ApprovalAnswer, ApprovalDesk
from timely_ros.config import (
    PLANNER_NODE,
    ConfigError,
    PlannerNames,
    PlannerParams,
    planner_params,
)
from timely_ros.diagnostics import NOT_HEARD_YET, diagnostics, unconfigured_diagnostics
from timely_ros.goal_journal import GoalJournal, JournalInUse
from timely_ros.goals import CheckedGoal, GoalError, check_goal, shutting_down
from timely_ros.identified_action_server import IdentifiedActionServer
from timely_ros.liveness import Beat, new_incarnation, publish_heartbeats, watch_heartbeats
from timely_ros.node_main import run_node
from timely_ros.node_params import node_parameters
from timely_ros.param_descriptors import declare_planner_parameters
from timely_ros.plan_job import JobHooks, PlanJob
from timely_ros.qos import DEEP, LATCHED, LATEST, REPORTS, TOPIC, action_server_qos
from timely_ros.robot_link import RobotLink
from timely_ros.robot_turns import RobotTurns
from timely_ros.robot_watch import RobotWatch
from timely_ros.status import GoalCounts, RobotState, status_msg, unconfigured_status
from timely_ros.twin_planner import TwinWatch

SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE
# settings the node's topics, action and robot links are built from, at start-up
FLEET_FIELDS = ("namespace", "robots")
# robot settings that configure reads afresh (tool processes start at configure)
CONFIGURE_TIME_ROBOT_FIELDS = {"tools": ()}
CLIP_CHARS = 200  # of an instruction repeated in a log line


def _fleet(params: PlannerParams, field: str) -> Any:
    """`params.<field>` as start-up fixed it: robots without what configure reads."""
    value = getattr(params, field)
    if field == "robots":
        return [r.model_copy(update=CONFIGURE_TIME_ROBOT_FIELDS) for r in value]
    return value


class PlannerNode(LifecycleNode):
    def __init__(self, service: Any = None, **node_kwargs: Any) -> None:
        node_kwargs.setdefault("namespace", f"/{PlannerNames().namespace}")
        super().__init__(PLANNER_NODE, **node_kwargs)  # overrides: declare_planner_parameters
        names = PlannerNames(self.get_namespace())  # relative names resolve under it
        self._lock = threading.Lock()
        self._jobs: dict[bytes, PlanJob] = {}
        self.service: Any = None  # built by configure
        declare_planner_parameters(self)
        self.params: PlannerParams = planner_params(node_parameters(self))
        self._given_service = service
        self._state = "unconfigured"  # this node's lifecycle state, for reports
        self._configure_error: Exception | None = None
        self._pending_scenes: dict[str, str] = {}  # published before configure
        self._checked: dict[int, CheckedGoal] = {}
        self._rejected = 0  # goals refused at goal time
        self._accepted = 0
        self._ended: Counter[str] = Counter()  # succeeded, aborted, cancelled
        self.incarnation = new_incarnation()
        goals = ReentrantCallbackGroup()
        robots = ReentrantCallbackGroup()
        self._watch = RobotWatch(
            self, self.params.robots, self.params.robot_timeout_s, lambda: self._links
        )
        self._links = {
            r.id: RobotLink(
                self,
                r,
                robots,
                self._watch.silent_s(r.id),
                self.params.robot_timeout_s,
                lambda: self.params.robot_answer_timeout_s,
            )
            for r in self.params.robots
            if r.dispatch
        }
        publish_heartbeats(self, names.heartbeat, self.get_fully_qualified_name(), self.incarnation)
        self._twins = TwinWatch(self.get_fully_qualified_name(), self.incarnation)
        watch_heartbeats(self, names.heartbeat, self._on_own_beat, MutuallyExclusiveCallbackGroup())
        self._segments_pub = self.create_publisher(SegmentMsg, names.segments, TOPIC)
        self._status_pub = self.create_publisher(ServiceStatus, names.status, TOPIC)
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", TOPIC)
        # a burst of bad goals is a burst of rejections: deep, so none is overwritten
        self._rejections_pub = self.create_publisher(String, names.rejections, DEEP)
        self._progress_pub = self.create_publisher(String, names.robot_progress, TOPIC)
        scenes = ReentrantCallbackGroup()
        for robot in self.params.robots:
            self.create_subscription(
                String,
                robot.scene_topic_name,
                partial(self._on_scene, robot.id),
                LATEST,
                callback_group=scenes,
            )
        self._journal = self._open_journal(names)
        self._approvals_pub = self.create_publisher(String, names.approvals, LATCHED)
        self.approvals = ApprovalDesk(self._publish_approvals)
        self._publish_approvals([])
        self.create_subscription(
            String,
            names.approval_answers,
            self._on_approval_answer,
            TOPIC,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )
        self._hooks = JobHooks(
            now_stamp=self._stamp,
            publish_segment=self._segments_pub.publish,
            publish_progress=self._publish_progress,
            log=self._log_info,
            record_state=self._journal.progress if self._journal else JobHooks.record_state,
            approvals=self.approvals,
            approval_timeout_s=self.params.approval_timeout_s,
            replan_on_failure=self.params.replan_on_failure,
            turns=RobotTurns() if self.params.one_task_per_robot else None,
        )
        self._server = IdentifiedActionServer(
            self,
            PlanTask,
            names.plan_task,
            self._execute,
            goal_callback=self._on_goal,
            cancel_callback=self._on_cancel,
            callback_group=goals,
            **action_server_qos(),
        )
        self.create_timer(
            self.params.status_period_s,
            self._publish_status,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )
        self.add_on_set_parameters_callback(self._on_set_parameters)
        if self.params.autostart:
            if self.trigger_configure() != SUCCESS:
                error = self._configure_error or RuntimeError("the planner failed to configure")
                self.destroy_node()
                if isinstance(error, ConfigError):
                    raise error
                raise ConfigError(  # a setting it cannot run with (a KV budget below a block)
                    f"the planner failed to configure: {type(error).__name__}: {error}"
                ) from error
            self.trigger_activate()
        else:
            self.get_logger().info(
                f"planner {self.get_fully_qualified_name()} unconfigured (autostart false): "
                "waiting for configure and activate (timely lifecycle, ros2 lifecycle set)"
            )

    # ------------------------------------------------------------ lifecycle

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Read the parameters again, load the model, register the robots."""
        try:
            params = planner_params(node_parameters(self))
            changed = [f for f in FLEET_FIELDS if _fleet(params, f) != _fleet(self.params, f)]
            if changed:
                raise ConfigError(
                    f"{', '.join(changed)} changed since start-up: the planner's topics and "
                    "robot links are built from them; restart the planner to apply"
                )
            service = self._given_service
            if service is None:
                from timely_ros.service_factory import build_service

                service = build_service(params)
        except Exception as err:  # a failed configure leaves the node unconfigured
            self._configure_error = err
            self.get_logger().error(f"configure failed: {err}")
            return FAILURE
        self.params = params
        with self._lock:
            scenes, self._pending_scenes = self._pending_scenes, {}
            self.service = service
            self._state = "inactive"
        for robot_id, scene in scenes.items():
            self._apply_scene(robot_id, scene)
        robots_text = ", ".join(f"{r.id} ({r.type})" for r in self.params.robots)
        self.get_logger().info(
            f"planner {self.get_fully_qualified_name()} configured (incarnation "
            f"{self.incarnation}): engine {self.params.engine}, policy {self.params.policy}, "
            f"robots {robots_text}"
        )
        return SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.service.start()
        with self._lock:
            self._state = "active"
        self.get_logger().info(f"planner {self.get_fully_qualified_name()} up: serving goals")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Drain: reject new goals, let active ones end within `drain_timeout_s`, then
        stop the rest (aborted, with the reason) and the scheduling loop."""
        with self._lock:
            self._state = "inactive"
            active = len(self._jobs) + len(self._checked)
        timeout_s = self.params.drain_timeout_s
        self.get_logger().info(
            f"deactivating: draining {active} active goal(s) (at most {timeout_s:g} s)"
        )
        if not self._wait_for_goals(timeout_s):
            with self._lock:
                jobs = list(self._jobs.values())
            for job in jobs:
                job.stop(f"planner deactivated: the goal did not end within {timeout_s:g} s")
            self._wait_for_goals(10.0)
        self.service.stop()
        self.get_logger().info(f"planner {self.get_fully_qualified_name()} inactive")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Unload the model (the engine and its KV go with the service, and so do
        the tool processes configure started for it)."""
        with self._lock:
            service, self.service = self.service, None
            self._state = "unconfigured"
        if service is not None:
            service.stop()
            if service is not self._given_service:  # a given one is configured again
                _close_tools(service)
        self.get_logger().info(f"planner {self.get_fully_qualified_name()} unconfigured")
        return SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_everything()
        with self._lock:
            self._state = "finalized"
        self.get_logger().info(f"planner {self.get_fully_qualified_name()} shut down")
        return SUCCESS

    @property
    def finalized(self) -> bool:
        """Shut down (lifecycle): it serves nothing any more, `timely up` stops."""
        with self._lock:
            return self._state == "finalized"

    @property
    def goals_in_progress(self) -> int:
        """Goals accepted and not yet ended (`bringup.spin` waits for them to end)."""
        with self._lock:
            return len(self._jobs) + len(self._checked)

    def _wait_for_goals(self, timeout_s: float) -> bool:
        """Whether every accepted goal ended within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._jobs and not self._checked:
                    return True
            time.sleep(0.02)
        with self._lock:
            return not self._jobs and not self._checked

    def _on_own_beat(self, beat: Beat) -> None:
        if self._twins.beat(beat):
            self.get_logger().error(f"goals refused: {self._twins.why()}")

    def _on_set_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        """Parameters are read at configure: changing them while configured would
        not take effect, so it is refused (clean up first)."""
        with self._lock:
            state = self._state
        if state == "unconfigured":
            return SetParametersResult(successful=True)
        names = ", ".join(p.name for p in parameters)
        return SetParametersResult(
            successful=False,
            reason=f"{names}: the planner reads its parameters at configure and is {state}; "
            + _RECONFIGURE_HINTS.get(state, ""),
        )

    def _open_journal(self, names: PlannerNames) -> GoalJournal | None:
        """The goal journal, if configured; the goals an earlier run left open are
        reported on /timely/interrupted (kept for late subscribers) and logged."""
        if not self.params.journal_path:
            return None
        try:
            journal = GoalJournal(self.params.journal_path, self.get_fully_qualified_name(),
                                  self.incarnation)  # fmt: skip
        except JournalInUse as err:
            raise ConfigError(str(err)) from None
        except (OSError, sqlite3.Error) as err:
            raise ConfigError(
                f"journal_path {self.params.journal_path!r}: cannot open it ({err})"
            ) from None
        publisher = self.create_publisher(String, names.interrupted, REPORTS)
        for goal in journal.interrupted():
            publisher.publish(String(data=json.dumps(asdict(goal))))
            self.get_logger().warning(
                f"goal {goal.goal_id} for {goal.robot_id} ({goal.instruction!r}): {goal.reason}"
            )
        return journal

    @property
    def executor_threads(self) -> int:
        """Threads a MultiThreadedExecutor needs so every active goal can block."""
        return self.params.max_active_goals + 2 * len(self._links) + 8

    def _log_info(self, message: str) -> None:
        self.get_logger().info(message)

    def _stamp(self) -> Time:
        return self.get_clock().now().to_msg()

    def _on_goal(self, goal: PlanTask.Goal) -> GoalResponse:
        try:
            with self._lock:
                state, service = self._state, self.service
            if state != "active":
                raise GoalError(
                    f"planner {self.get_fully_qualified_name()} is {state}: it accepts goals "
                    f"only when active ({_ACTIVATE_HINTS.get(state, '')})"
                )
            twin = self._twins.why()
            if twin is not None:
                raise GoalError(twin)
            checked = check_goal(goal, self.params)
            silent = self._watch.why_not_responding(checked.robot.id)
            if checked.dispatch and silent is not None:
                raise GoalError(silent)
            check = getattr(service, "check", None)
            if check is not None:  # the prompt's length in tokens, as submit counts it
                try:
                    check(checked.request)
                except (ServiceError, ValueError) as err:
                    raise GoalError(str(err)) from None
            knows = getattr(service.engine, "knows", None)
            request = checked.request
            scene = request.scene or service.scene(checked.robot.id)
            if knows is not None and not knows(checked.robot.type, scene, request.instruction):
                raise GoalError(
                    f"instruction {request.instruction!r} (scene {scene!r}): the "
                    "simulated engine replays the data set's plans and knows none for it"
                )
            with self._lock:
                if len(self._jobs) + len(self._checked) >= self.params.max_active_goals:
                    raise GoalError(
                        f"planner busy: {self.params.max_active_goals} goals already active"
                    )
                self._checked[id(goal)] = checked
        except GoalError as err:
            with self._lock:
                self._rejected += 1
            reason = json.dumps(
                {
                    "goal_id": self._server.goal_id_of(goal),
                    "robot_id": goal.robot_id,
                    "instruction": goal.instruction,  # clients match a bare goal by it
                    "reason": str(err),
                }
            )
            self._rejections_pub.publish(String(data=reason))
            self.get_logger().warning(f"rejected goal for robot {goal.robot_id!r}: {err}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_scene(self, robot_id: str, msg: String) -> None:
        with self._lock:
            if self.service is None:  # kept for the service configure builds
                self._pending_scenes[robot_id] = msg.data
                return
        self._apply_scene(robot_id, msg.data)

    def _apply_scene(self, robot_id: str, scene: str) -> None:
        try:
            self.service.publish_scene(robot_id, scene)
        except ValidationError as err:
            problems = "; ".join(e["msg"] for e in err.errors())
            reason = json.dumps({"robot_id": robot_id, "scene_update": True, "reason": problems})
            self._rejections_pub.publish(String(data=reason))
            self.get_logger().warning(f"ignored scene of robot {robot_id!r}: {problems}")

    def _publish_approvals(self, pending: list[dict[str, object]]) -> None:
        self._approvals_pub.publish(String(data=json.dumps({"pending": pending})))

    def _on_approval_answer(self, msg: String) -> None:
        try:
            answer = ApprovalAnswer.model_validate_json(msg.data)
        except ValidationError as err:
            problems = "; ".join(e["msg"] for e in err.errors())
            self.get_logger().warning(f"ignored an approval answer: {problems}")
            return
        done = self.approvals.answer(answer)
        who = f" by {answer.operator}" if answer.operator else ""
        self.get_logger().info(f"approval answer{who}: {done}")

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        with self._lock:
            job = self._jobs.get(bytes(goal_handle.goal_id.uuid))
        if job is not None:
            job.cancel()
        return CancelResponse.ACCEPT

    def _execute(self, goal_handle: ServerGoalHandle) -> PlanTask.Result:
        key = bytes(goal_handle.goal_id.uuid)
        with self._lock:
            checked = self._checked.pop(id(goal_handle.request), None)
        if checked is None:  # cannot happen for goals that passed _on_goal
            checked = check_goal(goal_handle.request, self.params)
        service = self.service
        if service is None:  # cleaned up between acceptance and execution
            goal_handle.abort()
            return PlanTask.Result(success=False, error="the planner was cleaned up")
        job = PlanJob(
            service,
            goal_handle,
            checked,
            self._links.get(checked.robot.id),
            self._hooks,
            self.params.executor_wait_s,
            self.params.result_timeout_s,
        )
        with self._lock:
            self._jobs[key] = job
            self._accepted += 1
        self.get_logger().info(
            f"event=goal_accepted goal={job.goal_id} robot={checked.robot.id} "
            f"instruction={_clipped(checked.request.instruction)!r}"
        )
        if self._journal is not None:
            self._journal.accepted(job.goal_id, checked.robot.id, checked.request.instruction)
        outcome = "aborted: internal error"
        try:
            result = job.execute()
            outcome = "succeeded" if result.success else result.error
        finally:
            with self._lock:
                self._jobs.pop(key, None)
                self._ended[_ending(goal_handle, job.succeeded)] += 1
            if self._journal is not None:
                self._journal.ended(job.goal_id, outcome)
        if not result.success:
            self.get_logger().info(f"goal for {checked.robot.id} ended: {result.error}")
        return result

    def _publish_progress(self, payload: dict[str, object]) -> None:
        self._progress_pub.publish(String(data=json.dumps(payload)))

    def _publish_status(self) -> None:
        unseen = {r.id for r in self.params.robots if self._unseen(r.id)}  # once per status
        with self._lock:
            goals = GoalCounts(
                rejected=self._rejected,
                succeeded=self._ended["succeeded"],
                accepted=self._accepted,
                aborted=self._ended["aborted"],
                cancelled=self._ended["cancelled"],
            )
            robots = self._robot_states(unseen)
            service, state = self.service, self._state
            pending = dict(self._pending_scenes)
        # the service's own lock, not taken while holding this node's
        scenes = (
            pending if service is None else {r.id: service.scene(r.id) for r in self.params.robots}
        )
        robots = [replace(r, scene=scenes.get(r.robot_id, "")) for r in robots]
        if service is None:  # unconfigured: no model, nothing to report but that
            stamp = self._stamp()
            self._status_pub.publish(
                unconfigured_status(self.params, goals, stamp, self.incarnation, robots, state)
            )
            self._diagnostics_pub.publish(
                unconfigured_diagnostics(self.get_fully_qualified_name(), stamp, state)
            )
            return
        memory = getattr(service.engine, "memory", None)
        weights = getattr(service, "resident_weights", None)  # fleet variants' memory
        status = status_msg(
            service.stats(),
            memory() if memory is not None else None,
            self.params,
            goals,
            self._stamp(),
            self.incarnation,
            self._watch.liveness.not_responding(),
            robots,
            weights() if weights is not None else None,
            lifecycle_state=state,
        )
        self._status_pub.publish(status)
        self._diagnostics_pub.publish(
            diagnostics(
                status,
                self.params,
                self.get_fully_qualified_name(),
                status.stamp,
                state,
                twin=self._twins.why(),
                never_heard=unseen,
            )
        )

    def _robot_states(self, unseen: Collection[str]) -> list[RobotState]:
        """Per robot: what the goal it runs does, else its oldest active goal, and
        whether nothing is seen of it (`unseen`, see `_unseen`; call holding `_lock`)."""
        gone = set(self._watch.liveness.not_responding())
        turns = self._hooks.turns
        jobs: dict[str, list[tuple[str, PlanJob]]] = {}
        for key, job in self._jobs.items():  # insertion order: oldest first
            jobs.setdefault(job.robot_id, []).append((key.hex(), job))
        for robot_id, held in jobs.items():  # the robot's running goal first
            running = turns.holder(robot_id) if turns is not None else None
            held.sort(key=lambda entry: entry[0] != running)
        states = []
        for robot in self.params.robots:
            goal_id, state = "", "idle"
            if robot.id in jobs:
                goal_id, state = jobs[robot.id][0][0], jobs[robot.id][0][1].state
                if len(jobs[robot.id]) > 1:
                    state += f" (+{len(jobs[robot.id]) - 1} more goals)"
            if robot.id in gone:
                state = "not responding" + (f" ({state})" if goal_id else "")
            elif robot.id in unseen:
                state += f"; {NOT_HEARD_YET}"  # its goals wait executor_wait_s, then fail
            states.append(RobotState(robot.id, state, goal_id))
        return states

    def _unseen(self, robot_id: str) -> bool:
        """A robot the planner dispatches to of which nothing is seen: no heartbeat
        ever, and no executor action server (another vendor's executor may send no
        heartbeat, and is judged by its server)."""
        link = self._links.get(robot_id)
        return (
            link is not None
            and self._watch.liveness.silent_s(robot_id) is None
            and not link.server_seen()
        )

    def stop_serving(self) -> None:
        """Cancel every goal, stop the service and its tool processes: the process is
        going down (`bringup.spin`), and a goal's thread must not wait on a tool."""
        if hasattr(self, "_jobs"):  # not when the constructor failed early
            self._stop_everything()

    def _stop_everything(self) -> None:
        with self._lock:
            jobs = list(self._jobs.values())
            service = self.service
        for job in jobs:  # aborted, saying why: no client cancelled them
            job.stop(shutting_down(self.get_fully_qualified_name()))
        if service is not None:
            service.stop()
        # the node is done: no tool process outlives it (a given service's included)
        given = getattr(self, "_given_service", None)
        for held in (service, given) if given is not service else (service,):
            if held is not None:
                _close_tools(held)

    def destroy_node(self) -> None:
        self.stop_serving()
        journal: GoalJournal | None = getattr(self, "_journal", None)
        if journal is not None:
            journal.close()
        super().destroy_node()


# what an operator does from each lifecycle state: to serve goals, and to set parameters
_ACTIVATE_HINTS = {
    "unconfigured": "timely lifecycle configure, then activate",
    "inactive": "timely lifecycle activate",
    "finalized": "it was shut down: restart it",
}
_RECONFIGURE_HINTS = {
    "active": "deactivate and clean it up (timely lifecycle), set them, then configure",
    "inactive": "clean it up (timely lifecycle cleanup), set them, then configure",
    "finalized": "it was shut down: restart it with them",
}


def _clipped(text: str, limit: int = CLIP_CHARS) -> str:
    """`text` as far as a log line repeats it (the goal id names it)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _ending(goal_handle: ServerGoalHandle, succeeded: bool) -> str:
    """How an executed goal ended, for the counters: succeeded, cancelled or aborted."""
    if succeeded:
        return "succeeded"
    if goal_handle.status == GoalStatus.STATUS_CANCELED:
        return "cancelled"
    return "aborted"


def _close_tools(service: Any) -> None:
    """Stop the service's tool plugin processes (a service without tools has none)."""
    close = getattr(service, "close_tools", None)
    if close is not None:
        close()


def main(args: list[str] | None = None) -> int:
    """Console entry: `timely_planner --ros-args --params-file CONFIG.yaml`."""
    return run_node(PlannerNode, args)


if __name__ == "__main__":
    sys.exit(main())
