"""The planner's side of one robot: an ExecuteSkill action client.

`execute` blocks the calling (plan-goal) thread on events set by the client's
future callbacks, which the executor runs on other threads; `cancel` may be called
from the cancel callback at any time and reaches the robot's outstanding goal, also
one the robot confirms only after the segment was given up.

A robot that stops sending heartbeats (frozen, dead, cut off) is given up within
the planner's `robot_timeout_s`: its segment is told to stop, and told again when
the robot is back (a stopped process cannot hear it until then), so it never
finishes the motion of a task that has ended.

A robot that beats but does not answer a segment's goal request within
`answer_timeout_s` (its executor never heard the request, or its answer was lost)
is given up the same way: the goal is cancelled by its id at once, in case it runs
unconfirmed, and again whenever a late acceptance arrives.

A cancelled segment returns once the robot has ended its goal (it stopped), or
after `STOP_CONFIRM_S` without that answer: so the task ends after its robot
stopped, not while it still moves.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from rclpy.task import Future
from timely_interfaces.action import ExecuteSkill
from timely_interfaces.msg import Segment as SegmentMsg
from unique_identifier_msgs.msg import UUID

from timely_ros.action_client import ActionClient
from timely_ros.config import RobotSpec
from timely_ros.qos import action_client_qos

FeedbackFn = Callable[[ExecuteSkill.Feedback], None]
LIVENESS_POLL_S = 0.1  # how often a waiting segment looks at the robot's heartbeat
STOP_CONFIRM_S = 2.0  # how long a cancelled segment waits for the robot to say it stopped


@dataclass(frozen=True)
class Outcome:
    success: bool
    cancelled: bool
    message: str
    return_value: str = ""
    robot_lost: bool = False  # the robot did not answer: `message` says so, not the robot


class SegmentRun:
    """One segment on its way to the robot; cancellable from another thread."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self._goal_handle: Any = None
        self._waking: threading.Event | None = None  # the event `wait` sleeps on now

    def attach(self, goal_handle: Any) -> None:
        with self._lock:
            self._goal_handle = goal_handle
            cancel_now = self.cancelled.is_set()
        if cancel_now:
            goal_handle.cancel_goal_async()

    def cancel(self) -> None:
        with self._lock:
            self.cancelled.set()
            handle = self._goal_handle
            waking = self._waking
        if handle is not None:
            handle.cancel_goal_async()
        if waking is not None:
            waking.set()

    @property
    def goal_handle(self) -> Any:
        with self._lock:
            return self._goal_handle

    def wait(self, future: Future, timeout_s: float | None = None) -> bool:
        """Wait for `future`; False if cancelled first or timed out.

        Each wait has its own event: a done-callback left on an earlier future of
        this run (they fire on executor threads, possibly late) must not wake it,
        or a segment would be reported cancelled before the robot started."""
        done = threading.Event()
        with self._lock:
            self._waking = done
        future.add_done_callback(lambda _f: done.set())
        if not self.cancelled.is_set():
            done.wait(timeout_s)
        return future.done() and not self.cancelled.is_set()


def _settled(future: Future, timeout_s: float) -> bool:
    """Wait up to `timeout_s` for `future`; whether it is done."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    return done.wait(max(timeout_s, 0.0)) or future.done()


def _cancel_if_accepted(send: Future) -> None:
    if send.exception() is not None:  # the send failed: no goal to cancel
        return
    handle = send.result()
    if handle is not None and handle.accepted:
        handle.cancel_goal_async()


class RobotLink:
    def __init__(
        self,
        node: Node,
        robot: RobotSpec,
        group: CallbackGroup,
        silent_s: Callable[[], float | None] = lambda: None,
        timeout_s: float = float("inf"),
        answer_timeout_s: Callable[[], float] = lambda: float("inf"),
    ) -> None:
        """`silent_s`: seconds since the robot's last heartbeat (None: it sends none,
        then only its action server's presence tells); past `timeout_s` it is gone.
        `answer_timeout_s`: how long a goal request may go unanswered (read at each
        segment, so a reconfigured planner's value applies)."""
        self.robot = robot
        self._answer_timeout_s = answer_timeout_s
        self._client: ActionClient = ActionClient(
            node, ExecuteSkill, robot.action_name, callback_group=group, **action_client_qos()
        )
        self._silent_s = silent_s
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._abandoned: list[Any] = []  # goal handles given up while the robot was silent

    def robot_back(self) -> int:
        """The robot beats again (or restarted): stop again every segment given up
        while it was silent. Returns how many were told."""
        with self._lock:
            abandoned, self._abandoned = self._abandoned, []
        for handle in abandoned:
            handle.cancel_goal_async()
        return len(abandoned)

    def server_seen(self) -> bool:
        """The robot's executor action server is discovered (without waiting)."""
        return bool(self._client.server_is_ready())

    def wait_ready(self, timeout_s: float) -> bool:
        return bool(self._client.wait_for_server(timeout_sec=timeout_s))

    def execute(self, segment: SegmentMsg, run: SegmentRun, on_feedback: FeedbackFn) -> Outcome:
        goal = ExecuteSkill.Goal(
            task_id=segment.task_id,
            segment_index=segment.index,
            skills=segment.skills,
            text=segment.text,
        )
        goal_id = UUID(uuid=list(uuid.uuid4().bytes))
        send = self._client.send_goal_async(
            goal, feedback_callback=lambda m: on_feedback(m.feedback), goal_uuid=goal_id
        )
        answer_by = time.monotonic() + self._answer_timeout_s()
        stopped = self._wait_for(
            send, run, segment.index, "cancelled before the robot started", answer_by
        )
        if stopped is not None:
            if not send.done():  # it may run unconfirmed: stop it by its id
                self._client.cancel_goal_id_async(goal_id)
            # The robot may confirm the goal after this: it must not then run a segment
            # of a task that has ended here (now, or whenever its answer comes).
            send.add_done_callback(_cancel_if_accepted)
            if stopped.cancelled:
                return self._confirm_stop(send, stopped)
            return stopped
        handle = send.result()
        if handle is None or not handle.accepted:  # None: the send itself failed
            return Outcome(False, False, f"robot {self.robot.id} rejected segment {segment.index}")
        run.attach(handle)
        result_future = handle.get_result_async()
        stopped = self._wait_for(
            result_future, run, segment.index, f"cancelled; robot {self.robot.id} told to stop"
        )
        if stopped is not None and stopped.cancelled:
            return self._confirm_stop(send, stopped, result_future)
        if stopped is not None:
            return stopped
        response = result_future.result()
        if response is None:
            return Outcome(
                False, False, f"robot {self.robot.id}: no result for segment {segment.index}"
            )
        result: ExecuteSkill.Result = response.result
        return Outcome(result.success, False, result.message, result.return_value)

    def _confirm_stop(
        self, send: Future, cancelled: Outcome, result: Future | None = None
    ) -> Outcome:
        """After a cancel: wait (at most STOP_CONFIRM_S in all) for the robot to
        answer the goal and, if it accepted it, to end it; `cancelled` with what it
        said, or that it did not answer in time."""
        deadline = time.monotonic() + STOP_CONFIRM_S
        stopped = False
        if _settled(send, STOP_CONFIRM_S) and send.exception() is None:
            handle = send.result()
            if handle is None or not handle.accepted:
                stopped = True  # refused or never sent: it never ran
            else:
                result = result if result is not None else handle.get_result_async()
                stopped = _settled(result, deadline - time.monotonic())
        said = "stopped" if stopped else f"no answer within {STOP_CONFIRM_S:g} s"
        return Outcome(False, True, f"{cancelled.message} ({said})")

    def _wait_for(
        self,
        future: Future,
        run: SegmentRun,
        index: int,
        cancelled: str,
        answer_by: float = float("inf"),
    ) -> Outcome | None:
        """Wait for `future` while the robot is there: None once it is done, else why
        not (cancelled; the robot stopped sending heartbeats; its executor went away,
        also before it answered the goal; no answer by the monotonic time
        `answer_by`)."""
        while not run.wait(future, timeout_s=LIVENESS_POLL_S):
            if run.cancelled.is_set():
                return Outcome(False, True, cancelled)
            if time.monotonic() > answer_by:
                return Outcome(
                    False,
                    False,
                    f"robot {self.robot.id} did not answer segment {index}'s goal within "
                    f"{self._answer_timeout_s():g} s (robot_answer_timeout_s) although it is "
                    "up; the segment is given up and the robot told to stop it",
                    robot_lost=True,
                )
            silent = self._silent_s()
            if silent is not None and silent > self._timeout_s:
                self._abandon(run)
                return Outcome(
                    False,
                    False,
                    f"robot {self.robot.id} stopped responding during segment {index} "
                    f"(no heartbeat for {silent:.1f} s); it is told to stop",
                    robot_lost=True,
                )
            if not self._client.server_is_ready():
                self._abandon(run)
                return Outcome(
                    False,
                    False,
                    f"robot {self.robot.id} went away during segment {index} (its executor "
                    f"{self.robot.action_name} disappeared)",
                    robot_lost=True,
                )
        return None

    def _abandon(self, run: SegmentRun) -> None:
        """Tell the robot to stop its goal now and again once it is back."""
        handle = run.goal_handle
        if handle is None:
            return  # not confirmed yet: `execute` cancels it whenever it is
        handle.cancel_goal_async()
        with self._lock:
            self._abandoned.append(handle)
