"""One PlanTask goal from acceptance to result.

The service delivers segments and the result by callback into a queue; the goal's
thread takes them in order, streams each segment as feedback and on
/timely/segments, sends it to the robot and reports the robot's end with
`segment_done`. `cancel` (from the cancel callback) stops the generation at once,
frees its KV, and cancels the robot's outstanding ExecuteSkill goal. A goal the
robot's failure ends (not replanned) ends its task in the service as failed
(`segment_failed`), as does a lost robot, a segment an operator denied or a goal
the planner stopped (its result timeout, deactivation, shutdown: `fail`): only a
client's cancel counts as cancelled there. A goal that
ends early (cancelled, stopped, failed) reports the plan as far as it was streamed
with the service's response time, waiting time and utility of its task
(`TaskResult`: arrival -> dispatch of segment 0, the segments' waits, TUF0 of the
response; before any dispatch, the time waited so far and utility 0).

With `replan_on_failure` (PlannerParams) a segment the robot fails is reported
with `segment_failed`: the service rolls the plan back to that segment's end and
plans on from the failure. Segments delivered before the `Rollback` (planned past
the failure) are dropped here, never sent; the ones after it go on as usual. When
the service cannot replan (the plan had ended, the recovery cap) the robot's
failure ends the goal, as without the option.

Streamed skills (a robot with `streamed_skills`): each element of a streamed call
(`StreamedElement`, a leg of a drone's path) comes before the segment holding the
call and is sent to the robot at once as an ExecuteSkill goal of its own (a bare
call), after whatever the robot runs before it: goals go one at a time, each when
the one before has ended, so the robot runs them in order (concurrent goals of
one action server have no order rclpy guarantees, and a goal cannot be extended
once sent). The segment that follows (`Segment.streamed_elements`) is streamed as
feedback but not sent again: its elements ran. A cancel stops the element the
robot runs; the elements still queued here are never sent. With
`replan_on_failure`, an element the robot fails is reported as a failure of its
segment (`segment_failed(..., element=)`): its later elements are never sent (the
service hands on no more of them), the segment is streamed as feedback when it
comes, and the plan goes on from the `Rollback` as for any failed segment.

A robot runs one goal at a time (`JobHooks.turns`, `robot_turns.py`): before its
first segment (or element) goes to the robot, a goal takes the robot's turn and
keeps it until it ends; a goal that must wait for another goal's task to end says
so in its state, and the wait is reported to the service (`segment_started`) as
an approval's is.

Progress events on /timely/robot_progress: `start` when a segment is sent to the
robot (which then runs nothing else), `progress` from the robot's feedback, and
`end` when the robot ended it, with its `outcome`: "done", "failed", "cancelled"
or "robot lost" (and the `error`).

A segment whose statements need an operator's approval (`Segment.approvals`, from
the robot's limits) waits here, before it is sent: the robot waits too, and the
hold is reported to the service (`segment_started`) so it counts in the task's
waiting time. A denial, the approval timeout or a cancel ends the goal with that
reason, and the robot never gets the segment.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from builtin_interfaces.msg import Time
from rclpy.action.server import ServerGoalHandle
from timely_interfaces.action import ExecuteSkill, PlanTask
from timely_interfaces.msg import Segment as SegmentMsg

from timely_core.errors import ServiceError
from timely_core.events import Rollback, Segment, StreamedElement, TaskResult
from timely_ros.approval_desk import ApprovalDesk
from timely_ros.goal_state import end_cancelled
from timely_ros.goals import CheckedGoal
from timely_ros.messages import element_msg, segment_msg
from timely_ros.robot_link import Outcome, RobotLink, SegmentRun
from timely_ros.robot_turns import RobotTurns

_CANCELLED = object()
# How long a goal that ended early waits for its task's result from the service (it
# is delivered as the task is cancelled; this only bounds a service in trouble).
SERVICE_RESULT_WAIT_S = 2.0


@dataclass
class JobHooks:
    """What a job needs from its node (kept narrow so the job is testable)."""

    now_stamp: Callable[[], Time]
    publish_segment: Callable[[SegmentMsg], None]
    publish_progress: Callable[[dict[str, object]], None]  # on /timely/robot_progress
    log: Callable[[str], None]
    record_state: Callable[[str, str], None] = lambda _goal_id, _state: None  # journal
    approvals: ApprovalDesk | None = None  # where segments wait for an operator
    approval_timeout_s: float = 30.0
    replan_on_failure: bool = False  # a robot's failed segment is replanned (service)
    turns: RobotTurns | None = None  # one goal at a time per robot (None: no turns)


class PlanJob:
    def __init__(
        self,
        service: Any,
        goal_handle: ServerGoalHandle,
        checked: CheckedGoal,
        link: RobotLink | None,
        hooks: JobHooks,
        executor_wait_s: float,
        result_timeout_s: float = float("inf"),
    ) -> None:
        self._service = service
        self._goal_handle = goal_handle
        self._checked = checked
        self._link = link if checked.dispatch else None
        self._hooks = hooks
        self._wait_s = executor_wait_s
        self._result_timeout_s = result_timeout_s
        self._streamed: list[SegmentMsg] = []  # sent as feedback; the result repeats them
        self._recovered: list[str] = []  # robot failures rolled back, for the result
        self._stop_reason: str | None = None  # set when the planner, not the client, stops it
        self.succeeded = False  # planned and, when dispatched, executed to the end
        self.goal_id = bytes(goal_handle.goal_id.uuid).hex()
        self._state = "waiting for the robot's executor" if self._link else "planning"
        self._events: queue.Queue[object] = queue.Queue()
        self._run = SegmentRun()
        self._handle: Any = None
        self._lock = threading.Lock()
        self._robot_failure = ""  # the robot's reason, when it failed the last segment
        self._withdrawing = False  # between a replanned failure and its Rollback
        self._failed_path: int | None = None  # a streamed segment whose element failed

    @property
    def state(self) -> str:
        """What the goal does now (in /timely/status and the journal)."""
        return self._state

    @state.setter
    def state(self, value: str) -> None:
        self._state = value
        self._hooks.record_state(self.goal_id, value)

    @property
    def robot_id(self) -> str:
        return self._checked.robot.id

    def cancel(self) -> None:
        """Stop everything now; safe from any thread, any number of times."""
        t0 = time.monotonic()
        with self._lock:
            handle = self._handle
            self._run.cancel()
        self._events.put(_CANCELLED)
        if handle is not None:
            with contextlib.suppress(ServiceError):  # already finished: nothing to stop
                self._end_task(handle)
        t1 = time.monotonic()
        task = handle.task_id if handle is not None else "-"
        self._hooks.log(
            f"event=plan_cancelled task={task} robot={self.robot_id} "
            f"mono={t0:.6f} generation_stopped_mono={t1:.6f}"
        )

    def stop(self, reason: str) -> None:
        """Stop it like a cancel, but end the goal aborted with `reason` (and its
        task in the service failed with it)."""
        self._stop_reason = reason
        self.cancel()

    def _end_task(self, handle: Any) -> None:
        """End the service's task now: failed with the planner's reason when the
        planner stopped the goal, cancelled when the client did."""
        reason = self._stop_reason
        if reason is not None and not self._goal_handle.is_cancel_requested:
            handle.fail(reason)
        else:
            handle.cancel()

    def _expire(self) -> None:
        """The goal ran past `result_timeout_s`."""
        self.stop(
            f"timed out: no result within result_timeout_s={self._result_timeout_s:g} s; "
            "planning and the robot were stopped"
        )

    def execute(self) -> PlanTask.Result:
        timer = threading.Timer(self._result_timeout_s, self._expire)
        timer.daemon = True
        if self._result_timeout_s != float("inf"):
            timer.start()
        try:
            return self._execute()
        finally:
            timer.cancel()
            if self._hooks.turns is not None:
                self._hooks.turns.give_back(self.robot_id, self.goal_id)

    def _cancelled(self) -> PlanTask.Result:
        if self._stop_reason is not None and not self._goal_handle.is_cancel_requested:
            self._goal_handle.abort()
            return self._error(self._stop_reason)
        end_cancelled(self._goal_handle)
        return self._error("cancelled by the client")

    def _execute(self) -> PlanTask.Result:
        gh = self._goal_handle
        # bounded wait: a robot whose executor is not up gets a clear error
        if self._link is not None and not self._link.wait_ready(self._wait_s):
            gh.abort()
            return self._error(
                f"robot {self.robot_id}: executor {self._link.robot.action_name} "
                f"not available after {self._wait_s:g} s"
            )
        request = self._checked.request
        if self._hooks.replan_on_failure:
            request = request.model_copy(update={"replan_on_failure": True})
        if self._link is not None:  # it reports every segment's start and end: the
            # result then counts a wait for the robot's turn or an approval after the
            # plan was decoded
            request = request.model_copy(update={"result_after_reports": True})
        try:
            handle = self._service.submit(request)
        except (ServiceError, ValueError) as err:
            gh.abort()
            return self._error(f"{type(err).__name__}: {err}")
        self.state = "planning"
        with self._lock:
            self._handle = handle
            cancelled = self._run.cancelled.is_set()
        if cancelled:
            self.cancel()
        handle.on_segment(self._events.put)
        handle.on_element(self._events.put)
        handle.on_rollback(self._events.put)
        handle.on_result(self._events.put)
        return self._loop(handle)

    def _loop(self, handle: Any) -> PlanTask.Result:
        gh = self._goal_handle
        while True:
            event = self._events.get()
            if event is _CANCELLED or gh.is_cancel_requested:
                return self._cancelled()
            if isinstance(event, TaskResult):
                return self._finish(event)
            if isinstance(event, Rollback):
                self._rolled_back(event)
                continue
            if isinstance(event, StreamedElement):
                self._robot_failure = ""
                failure = self._deliver_element(handle, event)
                if failure is None:
                    continue
                if self._robot_failure and self._replan(handle, event):
                    continue
                return self._failed(handle, event.index, event.element, failure)
            assert isinstance(event, Segment)
            if self._withdrawing and event.index == self._failed_path:
                self._publish(event)  # in the plan: its elements ran up to the failed one
                continue
            if self._withdrawing:  # planned past the failure: never sent
                self._hooks.log(
                    f"event=segment_withdrawn robot={self.robot_id} task={event.task_id} "
                    f"segment={event.index}"
                )
                continue
            self._robot_failure = ""
            failure = self._deliver(handle, event)
            if failure is not None and self._robot_failure and self._replan(handle, event):
                continue
            if failure is not None:
                return self._failed(handle, event.index, None, failure)

    def _failed(
        self, handle: Any, index: int, element: int | None, failure: str
    ) -> PlanTask.Result:
        """End the goal with `failure` (segment `index`, or its streamed `element`, was
        not completed) and the service's task with it: a robot's failure reported as
        that (`segment_failed`, when it was not replanned), a lost robot or a denied
        segment as a failure (`fail`), a cancel or a stop as `_end_task` does."""
        gh = self._goal_handle
        if self._run.cancelled.is_set() or gh.is_cancel_requested:
            with contextlib.suppress(ServiceError):  # ended by the cancel or stop already
                self._end_task(handle)
            return self._cancelled()
        reported = False
        if self._robot_failure and not self._hooks.replan_on_failure:
            with contextlib.suppress(ServiceError, ValueError):
                handle.segment_failed(
                    index, self._robot_failure, self._service.clock.now(), element=element
                )
                reported = True
        if not reported:  # (the task may have ended meanwhile: nothing to stop)
            with contextlib.suppress(ServiceError):
                handle.fail(failure)
        gh.abort()
        return self._error(failure)

    def _deliver(self, handle: Any, segment: Segment) -> str | None:
        """Stream one segment and, when dispatching, run it on the robot: streamed
        as it goes to the robot, so after an approval it waits for and after its
        robot's turn (a segment denied or cancelled while held was never sent).
        Returns the robot's reason when it did not complete the segment."""
        if self._link is None:
            self._publish(segment)
            return None
        event, relay = self._progress(segment.task_id, segment.index)
        if segment.streamed_elements:  # its elements ran, each sent as it came
            self._publish(segment)
            event("end", 1.0, outcome="done")  # its `start` was its first element's
            with contextlib.suppress(ServiceError):
                handle.segment_done(segment.index, finished_at_s=self._service.clock.now())
            return None

        if segment.approvals:
            refused = self._await_approval(handle, segment)
            if refused is not None:
                return refused
        refused = self._take_turn(handle, segment.index)
        if refused is not None:
            return refused
        msg = self._publish(segment)
        event("start", 0.0)
        self.state = f"executing segment {segment.index}"
        outcome = self._link.execute(msg, self._run, relay)
        self.state = "planning"
        failed = self._failure(outcome, f"segment {segment.index}")
        if failed is not None:
            event("end", 0.0, outcome=_ended(outcome), error=failed)
            if not (outcome.cancelled or outcome.robot_lost):  # the robot's reason: replan
                self._robot_failure = outcome.message or "no reason given"
            return failed
        event("end", 1.0, outcome="done")
        # the task may have ended meanwhile (cancel); the loop sees that next
        with contextlib.suppress(ServiceError):
            handle.segment_done(segment.index, finished_at_s=self._service.clock.now())
        return None

    def _publish(self, segment: Segment) -> SegmentMsg:
        """Stream a segment as feedback and on /timely/segments (the result repeats it)."""
        msg = segment_msg(segment, self._hooks.now_stamp())
        self._streamed.append(msg)
        self._goal_handle.publish_feedback(PlanTask.Feedback(segment=msg))
        self._hooks.publish_segment(msg)
        return msg

    def _progress(
        self, task_id: str, index: int, element: int | None = None
    ) -> tuple[Callable[..., None], Callable[[ExecuteSkill.Feedback], None]]:
        """Publishers of a segment's (or one of its elements') progress events."""

        def event(kind: str, progress: float, skill: str = "", **more: object) -> None:
            report: dict[str, object] = {
                "event": kind,
                "robot_id": self.robot_id,
                "task_id": task_id,
                "segment": index,
                "progress": round(progress, 4),
                "current_skill": skill,
            }
            if element is not None:
                report["element"] = element
            report.update(more)
            self._hooks.publish_progress(report)

        def relay(feedback: ExecuteSkill.Feedback) -> None:
            event("progress", float(feedback.progress), feedback.current_skill)

        return event, relay

    def _deliver_element(self, handle: Any, element: StreamedElement) -> str | None:
        """Run one element of a streamed call on the robot (after what it ran before);
        the reason when it did not complete it."""
        if self._withdrawing:  # planned past a failure: never sent
            return None
        if self._link is None:
            return None  # not dispatching: the call streams with its segment
        refused = self._take_turn(handle, element.index)
        if refused is not None:
            return refused
        msg = element_msg(element, self._hooks.now_stamp())
        event, relay = self._progress(element.task_id, element.index, element.element)
        self._hooks.log(
            f"event=element_sent robot={self.robot_id} task={element.task_id} "
            f"segment={element.index} element={element.element} call={element.text!r} "
            f"decoded={element.call_text!r} mono={time.monotonic():.6f}"
        )
        # the segment starts with its first element (`start`, as /timely/robot_progress
        # readers such as the LRTrace replay expect); it ends with its last
        event("start" if element.element == 0 else "element_start", 0.0, element.text)
        self.state = f"executing segment {element.index}, element {element.element + 1}"
        outcome = self._link.execute(msg, self._run, relay)
        self.state = "planning"
        what = f"element {element.element + 1} ({element.text}) of segment {element.index}"
        failed = self._failure(outcome, what)
        if failed is not None:  # the segment ends with its element
            event("end", 0.0, element.text, outcome=_ended(outcome), error=failed)
            if not (outcome.cancelled or outcome.robot_lost):  # the robot's reason: replan
                self._robot_failure = outcome.message or "no reason given"
            return failed
        event("element_end", 1.0, element.text)
        return None

    def _take_turn(self, handle: Any, index: int) -> str | None:
        """Take the robot's turn before sending it segment `index` (at once when this
        goal holds it or the robot is free); the reason when it may not be sent."""
        turns = self._hooks.turns
        if turns is None:
            return None
        waited: list[str] = []

        def on_wait(holder: str) -> None:
            waited.append(holder)
            self.state = f"waiting for robot {self.robot_id} (it runs goal {holder})"
            self._hooks.log(
                f"event=robot_busy robot={self.robot_id} goal={self.goal_id} holder={holder}"
            )

        if not turns.take(self.robot_id, self.goal_id, self._run.cancelled, on_wait):
            return "cancelled by the client"
        if waited:
            # the robot gets it only now; a streamed segment's element comes before its
            # segment is dispatched (ValueError): its timing starts with the segment
            with contextlib.suppress(ServiceError, ValueError):
                handle.segment_started(index, self._service.clock.now())
        return None

    def _failure(self, outcome: Outcome, what: str) -> str | None:
        """Why the robot did not complete `what` (None: it did)."""
        if outcome.cancelled:
            return "cancelled by the client"
        if outcome.robot_lost:
            return outcome.message
        if not outcome.success:
            return f"robot {self.robot_id} aborted {what}: {outcome.message}"
        return None

    def _replan(self, handle: Any, failed: Segment | StreamedElement) -> bool:
        """Report the robot's failure of a segment (or of an element of one) for
        replanning; False when the goal should end with it here (not enabled, or
        the plan had already ended)."""
        if not self._hooks.replan_on_failure:
            return False
        element = failed.element if isinstance(failed, StreamedElement) else None
        try:
            rollback = handle.segment_failed(
                failed.index, self._robot_failure, self._service.clock.now(), element=element
            )
        except (ServiceError, ValueError) as err:
            self._hooks.log(
                f"event=replan_refused robot={self.robot_id} task={failed.task_id} "
                f"segment={failed.index} reason={str(err)!r}"
            )
            return False
        # None: the service ended the task with the failure (its result follows),
        # or, for an element, it rolls back once the element's segment is cut
        self._withdrawing = rollback is not None or element is not None
        self._failed_path = failed.index if element is not None else None
        return True

    def _rolled_back(self, rollback: Rollback) -> None:
        self._withdrawing = False
        self._failed_path = None
        self._recovered.append(f"segment {rollback.failed_index}: {rollback.error}")
        self._hooks.log(
            f"event=plan_rolled_back robot={self.robot_id} task={rollback.task_id} "
            f"segment={rollback.failed_index} tokens_dropped={rollback.tokens_dropped} "
            f"withdrawn={list(rollback.withdrawn)} recovery={rollback.recovery}"
        )
        self._hooks.publish_progress(
            {
                "event": "rolled_back",
                "robot_id": self.robot_id,
                "task_id": rollback.task_id,
                "segment": rollback.failed_index,
                "progress": 0.0,
                "current_skill": "",
                "error": rollback.error,
                "tokens_dropped": rollback.tokens_dropped,
            }
        )
        self.state = "planning"

    def _await_approval(self, handle: Any, segment: Segment) -> str | None:
        """Hold `segment` until an operator approves it; the reason it may not be
        sent otherwise (denied, timed out, cancelled)."""
        reasons = "; ".join(segment.approvals)
        where = f"robot {self.robot_id}: segment {segment.index} ({segment.text.strip()!r})"
        desk = self._hooks.approvals
        if desk is None:
            return f"{where} needs an operator's approval and this planner takes none"
        self.state = f"waiting for approval of segment {segment.index}"
        request = desk.open(
            self.robot_id,
            self.goal_id,
            segment.task_id,
            segment.index,
            segment.text,
            segment.approvals,
        )
        tags = (
            f"request={request.request_id} robot={self.robot_id} "
            f"task={segment.task_id} segment={segment.index}"
        )
        self._hooks.log(f"event=approval_requested {tags} reasons={reasons!r}")
        timeout_s = self._hooks.approval_timeout_s
        desk.wait(request, timeout_s, self._run.cancelled)
        outcome = request.outcome or "timed out"
        self._hooks.log(f"event=approval_{outcome.replace(' ', '_')} {tags}")
        if outcome == "approved":
            with contextlib.suppress(ServiceError):  # the robot got it only now
                handle.segment_started(segment.index, self._service.clock.now())
            return None
        if outcome == "cancelled":
            return "cancelled by the client"
        if outcome == "denied":
            said = f" ({request.reason})" if request.reason else ""
            return f"{where} denied by the operator{said}: {reasons}; nothing was sent"
        return (
            f"{where} not approved within approval_timeout_s={timeout_s:g} s: {reasons}; "
            "nothing was sent"
        )

    def _finish(self, result: TaskResult) -> PlanTask.Result:
        if not result.success and (
            self._goal_handle.is_cancel_requested or self._run.cancelled.is_set()
        ):  # ended by the cancel (or a stop): reported as any cancelled goal is
            return self._cancelled()
        msg = PlanTask.Result(
            success=result.success,
            plan=result.plan_text,
            segment_count=result.segment_count,
            response_time_s=float(result.response_time_s),
            waiting_time_s=float(result.waiting_time_s),
            utility=float(result.utility),
            error=result.error,
            segments=list(self._streamed),
            recovered_failures=list(self._recovered),
        )
        if result.success:
            self._goal_handle.succeed()
            self.succeeded = True
        else:
            self._goal_handle.abort()
        return msg

    def _error(self, message: str) -> PlanTask.Result:
        """A goal that ended early: the plan as far as it was streamed, with the
        service's times and utility of its task (0 when it never reached the service)."""
        msg = PlanTask.Result(
            success=False,
            error=message,
            plan="".join(s.text for s in self._streamed),
            segment_count=len(self._streamed),
            segments=list(self._streamed),
            recovered_failures=list(self._recovered),
        )
        result = self._service_result()
        if result is not None:
            msg.response_time_s = float(result.response_time_s)
            msg.waiting_time_s = float(result.waiting_time_s)
            msg.utility = float(result.utility)
        return msg

    def _service_result(self) -> TaskResult | None:
        """The service's result of this goal's task, which is ended first if it still
        runs (every early end has stopped it already, but a cancel callback that came
        before the job was registered did not); None when the goal never reached the
        service or the result did not come within SERVICE_RESULT_WAIT_S."""
        with self._lock:
            handle = self._handle
        if handle is None:
            return None
        if not handle.done():  # (a cancel waits for the engine's iteration in progress)
            with contextlib.suppress(ServiceError):  # ended meanwhile: its result is out
                self._end_task(handle)
        try:
            result: TaskResult = handle.result(timeout_s=SERVICE_RESULT_WAIT_S)
        except TimeoutError:
            self._hooks.log(
                f"event=service_result_missing task={handle.task_id} robot={self.robot_id} "
                f"waited_s={SERVICE_RESULT_WAIT_S:g}"
            )
            return None
        return result


def _ended(outcome: Outcome) -> str:
    """How a segment the robot did not complete ended, for its `end` event."""
    if outcome.cancelled:
        return "cancelled"
    return "robot lost" if outcome.robot_lost else "failed"
