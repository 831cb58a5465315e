"""A robot's safety check on each complete statement before it is delivered.

`timely_core` knows no robot's limits: a caller gives `register_robot` a
`GuardFactory`, and every task of that robot gets a fresh `StatementGuard` from
it (a guard may keep state across the task's statements, such as the position
its moves lead to). The service asks it about each statement, in order, before
the statement's segment is delivered:
- "ok": delivered;
- "approval": delivered with the guard's message in `Segment.approvals`, and the
  caller holds it until an operator approves (see docs/service-api.md);
- "violation": the task ends with an error naming the robot and the guard's
  message; the segment and anything after it are never delivered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from timely_core.language.plan_language import PlanStatement

GUARD_OK = "ok"
GUARD_APPROVAL = "approval"
GUARD_VIOLATION = "violation"


class GuardVerdict(Protocol):
    @property
    def status(self) -> str:
        """ "ok", "approval" or "violation"."""

    @property
    def message(self) -> str:
        """What is wrong or needs approval: the limit, the statement, the value."""


class StatementGuard(Protocol):
    def check(self, statement: PlanStatement) -> GuardVerdict:
        """The next complete statement of the task (called once each, in order)."""


GuardFactory = Callable[[], StatementGuard]
