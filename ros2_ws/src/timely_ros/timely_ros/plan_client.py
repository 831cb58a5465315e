"""A PlanTask client (rclpy's minimal action client, callback style).

Used by `timely plan`, the demo, the replay target and the tests. Callbacks run on
the spinning executor; `PlanCall` collects what came back for one goal, and a
goal's rejection reason is matched from /timely/rejections by its goal id.

The client watches the planner's heartbeat (`liveness`): a goal whose planner stops
responding, or restarts (a new incarnation: the goals of the old one are lost),
ends at once with `client_error` saying so, instead of waiting for a result that
will never come. A planner that sends no heartbeat is waited for as before. A goal
the planner does not answer (accept or reject) within `answer_timeout_s` ends the
same way, and is cancelled by its id in case it runs unconfirmed (its request or
the answer was lost on the way; docs/ros.md).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from std_msgs.msg import String
from timely_interfaces.action import PlanTask
from timely_interfaces.msg import Segment as SegmentMsg
from timely_interfaces.msg import Tuf as TufMsg
from unique_identifier_msgs.msg import UUID

from timely_ros.action_client import ActionClient
from timely_ros.config import DEFAULT_NAMESPACE, planner_names
from timely_ros.liveness import Beat, LivenessWatch, watch_heartbeats
from timely_ros.qos import DEEP, REPORTS, action_client_qos


def make_goal(
    robot_id: str,
    instruction: str,
    *,
    urgency: str | None = None,
    scene: str = "",
    dispatch: bool = True,
    robot_type: str = "",
    tuf: TufMsg | None = None,
) -> PlanTask.Goal:
    """A PlanTask goal; `urgency` defaults to 'normal' unless a `tuf` is given. Raises
    ValueError for a NUL in the text: ROS strings end there, so the planner would
    receive, and plan, a truncated instruction without knowing it."""
    for name, text in (("instruction", instruction), ("scene", scene)):
        if "\x00" in text:
            raise ValueError(
                f"{name} has a NUL character at position {text.index(chr(0))}; "
                "ROS strings end at it, so the planner would see truncated text"
            )
    if urgency is None:
        urgency = "" if tuf is not None else "normal"
    return PlanTask.Goal(
        robot_id=robot_id,
        robot_type=robot_type,
        instruction=instruction,
        scene=scene,
        urgency=urgency,
        tuf=tuf or TufMsg(),
        dispatch=dispatch,
    )


@dataclass
class PlanCall:
    """Everything one goal produced, with arrival times (time.monotonic)."""

    goal: PlanTask.Goal
    sent_at: float = 0.0
    accepted: bool | None = None
    rejection: str = ""
    segments: list[SegmentMsg] = field(default_factory=list)
    segment_times: list[float] = field(default_factory=list)
    result: PlanTask.Result | None = None
    status: int = 0
    finished_at: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)
    goal_handle: Any = None
    goal_id: str = ""  # hex, as /timely/rejections names it
    planner_incarnation: str | None = None  # the planner it was sent to, when known
    client_error: str = ""  # set when the planner went away or restarted
    planner_restarted: bool = False  # the goal was lost to a restart (see interrupted_reason)
    cancel_requested: bool = False
    answered: threading.Event = field(default_factory=threading.Event)  # accepted or not

    def wait_answered(self, timeout_s: float) -> bool:
        """Wait until the planner accepted or rejected the goal, or the call ended
        without an answer; False if neither happened within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not (self.answered.is_set() or self.done.is_set()):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.answered.wait(min(left, 0.05))
        return True

    def final_result(self) -> PlanTask.Result:
        """The result; AssertionError naming the robot if the goal has none (yet)."""
        if self.result is None:
            raise AssertionError(
                f"goal for {self.goal.robot_id} has no result (accepted={self.accepted}"
                + (f"; {self.client_error}" if self.client_error else "")
                + ")"
            )
        return self.result


SegmentFn = Callable[[PlanCall, SegmentMsg], None]

# Feedback travels on a topic and the result on a service, and rclpy's action client
# handles a ready result before ready feedback, then forgets the goal's feedback
# callback: a last segment published just before the result would be dropped. So
# the client subscribes to the action's feedback topic itself, and the result repeats
# every segment: a call is done when the result arrives, the segments whose feedback
# is late taken from it (and the late feedback ignored). A planner whose result
# carries no segments (an older one): done once every segment the result counts has
# arrived, or this long after the result.
LATE_FEEDBACK_GRACE_S = 2.0
DEFAULT_PLANNER_TIMEOUT_S = 2.0  # the planner's heartbeat absent this long: it is gone
DEFAULT_ANSWER_TIMEOUT_S = 30.0  # a goal unanswered this long is given up
WATCH_PERIOD_S = 0.1
# a cancelled goal ends once its robot has stopped (robot_link.STOP_CONFIRM_S at most)
CANCEL_WAIT_S = 10.0
REJECTIONS_KEPT = 10_000
RECENT_REJECTIONS = 1_000
PLANNER = "planner"  # the key of the namespace's planner in the liveness watch


class PlanClient:
    def __init__(
        self,
        node: Node,
        namespace: str = DEFAULT_NAMESPACE,
        planner_timeout_s: float = DEFAULT_PLANNER_TIMEOUT_S,
        answer_timeout_s: float = DEFAULT_ANSWER_TIMEOUT_S,
    ) -> None:
        """A client of the planner in `namespace` (its action and topics live there)."""
        self.node = node
        self.answer_timeout_s = answer_timeout_s
        names = planner_names(namespace)
        action_name = names.absolute(names.plan_task)
        self._client: ActionClient = ActionClient(
            node, PlanTask, action_name, **action_client_qos()
        )
        self._lock = threading.Lock()
        # rejections by goal id, and the latest few in full (looked up by robot and
        # instruction for a bare goal message): both bounded, so a long-lived client
        # stays fast and small
        self._rejected: OrderedDict[str, str] = OrderedDict()
        self._rejections: deque[dict[str, str]] = deque(maxlen=RECENT_REJECTIONS)
        self._feedback_fns: dict[bytes, tuple[PlanCall, Callable[[Any], None]]] = {}
        self._open: list[PlanCall] = []  # sent, not done: watched for the planner's loss
        self.planner = LivenessWatch(planner_timeout_s)
        group = MutuallyExclusiveCallbackGroup()
        watch_heartbeats(node, names.absolute(names.heartbeat), self._on_planner_beat, group)
        node.create_timer(WATCH_PERIOD_S, self._watch_planner, callback_group=group)
        node.create_subscription(String, names.absolute(names.rejections), self._on_rejection, DEEP)
        self._interrupted: dict[str, str] = {}  # goal id -> what a restarted planner says
        node.create_subscription(
            String, names.absolute(names.interrupted), self._on_interrupted, REPORTS
        )
        node.create_subscription(
            PlanTask.Impl.FeedbackMessage,
            f"{action_name}/_action/feedback",
            self._on_feedback,
            action_client_qos()["feedback_sub_qos_profile"],
        )

    def wait_for_server(self, timeout_s: float) -> bool:
        """The action server is up; and its heartbeat heard, if it sends one (waited
        for up to a second more), so goals know which incarnation they went to."""
        deadline = time.monotonic() + timeout_s
        if not self._client.wait_for_server(timeout_sec=timeout_s):
            return False
        beat_deadline = min(deadline, time.monotonic() + 1.0)
        while self.planner.incarnation(PLANNER) is None and time.monotonic() < beat_deadline:
            time.sleep(0.01)
        return True

    def _on_planner_beat(self, beat: Beat) -> None:
        # the topic is the namespace's own: whoever beats on it is its planner
        self.planner.beat(Beat(PLANNER, beat.incarnation))
        self._watch_planner()

    def _watch_planner(self) -> None:
        """End open goals whose planner stopped responding or restarted, or that it
        did not answer in time."""
        silent = self.planner.silent_s(PLANNER)
        current = self.planner.incarnation(PLANNER)
        now = time.monotonic()
        with self._lock:
            calls = [c for c in self._open if not c.done.is_set()]
            self._open = calls
        for call in calls:
            if call.planner_incarnation is None:
                call.planner_incarnation = current  # sent before the first heartbeat
            if call.accepted is None and now - call.sent_at > self.answer_timeout_s:
                self._give_up_unanswered(call)
            elif silent is not None and silent > self.planner.timeout_s:
                self._lose(
                    call, f"the planner stopped responding (no heartbeat for {silent:.1f} s)"
                )
            elif current is not None and current != call.planner_incarnation:
                call.planner_restarted = True
                self._lose(
                    call,
                    f"the planner restarted (incarnation {call.planner_incarnation} -> "
                    f"{current}); the goal was lost with the planner before it",
                )

    def _give_up_unanswered(self, call: PlanCall) -> None:
        """Cancel the goal by its id now (it may run unconfirmed) and whenever its
        acceptance arrives late, and end the call."""
        with self._lock:
            if call.goal_handle is not None:  # answered meanwhile
                return
            call.cancel_requested = True
        self._client.cancel_goal_id_async(UUID(uuid=list(bytes.fromhex(call.goal_id))))
        self._lose(
            call,
            f"the planner did not answer the goal within {self.answer_timeout_s:g} s "
            "(its request or the answer was lost on the way); it was cancelled",
        )

    @staticmethod
    def _lose(call: PlanCall, why: str) -> None:
        call.client_error = f"goal for {call.goal.robot_id} ended without a result: {why}"
        call.finished_at = time.monotonic()
        call.done.set()

    def _on_interrupted(self, msg: String) -> None:
        report = json.loads(msg.data)
        with self._lock:
            self._interrupted[str(report.get("goal_id", ""))] = str(report.get("reason", ""))

    def interrupted_reason(self, call: PlanCall, wait_s: float = 0.0) -> str | None:
        """What a restarted planner (with a goal journal) reports about a goal the
        planner before it was serving; None if it says nothing within `wait_s`."""
        deadline = time.monotonic() + wait_s
        while True:
            with self._lock:
                reason = self._interrupted.get(call.goal_id)
            if reason is not None or time.monotonic() >= deadline:
                return reason
            time.sleep(0.02)

    def _on_rejection(self, msg: String) -> None:
        report = json.loads(msg.data)
        with self._lock:
            goal_id = str(report.get("goal_id") or "")
            if goal_id:
                self._rejected[goal_id] = str(report.get("reason", ""))
                while len(self._rejected) > REJECTIONS_KEPT:
                    self._rejected.popitem(last=False)
            self._rejections.append(report)

    def _on_feedback(self, msg: Any) -> None:
        with self._lock:
            entry = self._feedback_fns.get(bytes(msg.goal_id.uuid))
        if entry is not None:
            entry[1](msg)

    def rejection_reason(self, goal: PlanTask.Goal | PlanCall, wait_s: float = 1.0) -> str:
        """The planner's reason for rejecting a goal (published on /timely/rejections):
        by goal id for a `PlanCall`, else by robot and instruction."""
        call = goal if isinstance(goal, PlanCall) else None
        message = goal.goal if isinstance(goal, PlanCall) else goal
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with self._lock:
                if call is not None and call.goal_id in self._rejected:
                    return self._rejected[call.goal_id]
                for r in reversed(self._rejections):
                    if call is not None and r.get("goal_id"):
                        continue  # it names another goal
                    # a bare goal message, or a planner that names no goal id: by robot
                    # and instruction (scene updates come here too, with none)
                    if (
                        r.get("robot_id") == message.robot_id
                        and r.get("instruction") == message.instruction
                    ):
                        return r["reason"]
            time.sleep(0.02)
        return "rejected by the planner (no reason received)"

    def send(self, goal: PlanTask.Goal, on_segment: SegmentFn | None = None) -> PlanCall:
        """Send a goal; the returned PlanCall fills in as the executor spins."""
        call = PlanCall(goal=goal, sent_at=time.monotonic())
        lock = threading.Lock()

        def complete_if_all_segments() -> None:  # holding `lock`
            if call.result is not None and len(call.segments) >= call.result.segment_count:
                call.done.set()

        def add_segment(segment: SegmentMsg) -> bool:  # holding `lock`
            if any(s.index == segment.index for s in call.segments):
                return False  # a feedback after the result repeated it
            call.segments.append(segment)
            call.segment_times.append(time.monotonic())
            return True

        def feedback(msg: Any) -> None:
            segment: SegmentMsg = msg.feedback.segment
            with lock:
                if call.done.is_set() or not add_segment(segment):
                    return
            if on_segment is not None:
                on_segment(call, segment)
            with lock:
                complete_if_all_segments()

        def result(future: Any) -> None:
            response = future.result()
            with lock:
                late = [s for s in response.result.segments if add_segment(s)]
                if late:  # in index order, each with its arrival time
                    pairs = sorted(
                        zip(call.segments, call.segment_times, strict=True),
                        key=lambda pair: pair[0].index,
                    )
                    call.segments = [seg for seg, _ in pairs]
                    call.segment_times = [t for _, t in pairs]
            if on_segment is not None:
                for segment in late:
                    on_segment(call, segment)
            with lock:
                call.result = response.result
                call.status = response.status
                call.finished_at = time.monotonic()
                if response.result.segments:
                    call.done.set()  # every segment is here
                complete_if_all_segments()
            if not call.done.is_set():
                timer = threading.Timer(LATE_FEEDBACK_GRACE_S, call.done.set)
                timer.daemon = True
                timer.start()

        def accepted(future: Any) -> None:
            handle = future.result()
            with self._lock:
                call.goal_handle = handle
                cancel_now = call.cancel_requested
            call.accepted = bool(handle.accepted)
            call.answered.set()
            if not handle.accepted:
                call.finished_at = time.monotonic()
                call.done.set()
                return
            handle.get_result_async().add_done_callback(result)
            if cancel_now:  # cancelled while the goal was on its way
                handle.cancel_goal_async()

        goal_id = uuid.uuid4().bytes
        call.goal_id = goal_id.hex()
        call.planner_incarnation = self.planner.incarnation(PLANNER)
        with self._lock:
            for done in [k for k, (c, _) in self._feedback_fns.items() if c.done.is_set()]:
                del self._feedback_fns[done]
            self._feedback_fns[goal_id] = (call, feedback)
            self._open.append(call)
        self._client.send_goal_async(goal, goal_uuid=UUID(uuid=list(goal_id))).add_done_callback(
            accepted
        )
        return call

    def cancel(self, call: PlanCall) -> None:
        """Cancel the goal, also one the planner has not accepted yet: it is
        cancelled the moment its acceptance arrives."""
        with self._lock:
            call.cancel_requested = True
            handle = call.goal_handle
        if handle is not None:
            handle.cancel_goal_async()

    def cancel_and_wait(
        self, calls: Sequence[PlanCall], timeout_s: float = CANCEL_WAIT_S
    ) -> list[PlanCall]:
        """Cancel the goals and wait (at most `timeout_s` in all) until they have
        ended, so their robots have stopped; the calls not ended by then. A goal not
        accepted yet is cancelled when its acceptance arrives, so the node must spin
        meanwhile."""
        for call in calls:
            self.cancel(call)
        deadline = time.monotonic() + timeout_s
        for call in calls:
            call.done.wait(max(0.0, deadline - time.monotonic()))
        return [call for call in calls if not call.done.is_set()]
