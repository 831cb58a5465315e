"""Segments held for an operator's approval, and the operator's answers.

A statement the robot's limits mark for approval (`approval_skills`) makes its
segment wait in the goal's `PlanJob` before it is sent to the robot. The desk
keeps those requests; the planner publishes them (`approvals`, JSON) and takes
answers (`approval_answers`, JSON) from `timely approve`. Pure Python and
thread-safe: goal threads wait here while the node's callbacks answer.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Outcome = Literal["approved", "denied", "timed out", "cancelled"]


@dataclass
class ApprovalRequest:
    request_id: str
    robot_id: str
    goal_id: str
    task_id: str
    segment: int
    text: str
    reasons: tuple[str, ...]
    opened_mono: float
    opened_at: float = field(default_factory=time.time)  # wall clock, for other processes
    decided: threading.Event = field(default_factory=threading.Event)
    outcome: Outcome | None = None
    reason: str = ""  # the operator's words on a denial

    def summary(self) -> dict[str, object]:
        return {
            "request_id": self.request_id,
            "robot_id": self.robot_id,
            "goal_id": self.goal_id,
            "task_id": self.task_id,
            "segment": self.segment,
            "text": self.text,
            "reasons": list(self.reasons),
            "waiting_s": round(time.monotonic() - self.opened_mono, 3),  # when published
            "opened_at": self.opened_at,  # the latched message is not republished as time goes
        }


class ApprovalAnswer(BaseModel):
    """An operator's answer (from `timely approve`): one request, or the oldest
    pending request of a robot."""

    model_config = ConfigDict(extra="forbid")

    request_id: str = ""
    robot_id: str = ""
    approve: bool
    reason: str = Field(default="", max_length=500)
    operator: str = Field(default="", max_length=100)


class ApprovalDesk:
    def __init__(self, on_change: Callable[[list[dict[str, object]]], None]) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, ApprovalRequest] = {}  # insertion order: oldest first
        self._on_change = on_change

    def pending(self) -> list[dict[str, object]]:
        with self._lock:
            return [r.summary() for r in self._pending.values()]

    def open(
        self,
        robot_id: str,
        goal_id: str,
        task_id: str,
        segment: int,
        text: str,
        reasons: tuple[str, ...],
    ) -> ApprovalRequest:
        request = ApprovalRequest(
            uuid.uuid4().hex[:12],
            robot_id,
            goal_id,
            task_id,
            segment,
            text,
            reasons,
            time.monotonic(),
        )
        with self._lock:
            self._pending[request.request_id] = request
        self._changed()
        return request

    def wait(
        self, request: ApprovalRequest, timeout_s: float, stop: threading.Event
    ) -> ApprovalRequest:
        """Block until the operator answers, `timeout_s` passes or `stop` is set;
        the request leaves the pending list either way."""
        deadline = time.monotonic() + timeout_s
        while not request.decided.is_set():
            left = deadline - time.monotonic()
            if stop.is_set():
                self._decide(request, "cancelled", "")
            elif left <= 0:
                self._decide(request, "timed out", "")
            else:
                request.decided.wait(min(left, 0.05))
        return request

    def answer(self, answer: ApprovalAnswer) -> str:
        """Apply an operator's answer; returns what it did (for the log)."""
        with self._lock:
            request = self._pending.get(answer.request_id) if answer.request_id else None
            if request is None and answer.robot_id and not answer.request_id:
                request = next(
                    (r for r in self._pending.values() if r.robot_id == answer.robot_id), None
                )
        if request is None:
            target = answer.request_id or f"robot {answer.robot_id or '?'}"
            return f"no pending approval for {target}"
        outcome: Outcome = "approved" if answer.approve else "denied"
        self._decide(request, outcome, answer.reason)
        return f"{request.request_id} ({request.robot_id}, segment {request.segment}) {outcome}"

    def _decide(self, request: ApprovalRequest, outcome: Outcome, reason: str) -> None:
        with self._lock:
            if request.decided.is_set():
                return
            request.outcome = outcome
            request.reason = reason
            request.decided.set()
            self._pending.pop(request.request_id, None)
        self._changed()

    def _changed(self) -> None:
        self._on_change(self.pending())
