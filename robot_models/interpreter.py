"""Runs a parsed plan against a `SkillExecutor`, statement by statement, so a
robot can start on the first statement while the rest is still being decoded."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from robot_models.errors import PlanRuntimeError
from robot_models.executors import ProgressCallback, SkillExecutor
from robot_models.plan_ast import (
    Assign,
    BoolOp,
    BoundCall,
    CallStmt,
    Compare,
    Condition,
    Expr,
    If,
    Literal,
    Loop,
    PlanStatement,
    Return,
    SkillCall,
    Stmt,
    VarRef,
)
from robot_models.skills import SkillSet, SkillValue

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class _Returned(Exception):  # control flow only, never escapes this module
    def __init__(self, value: SkillValue) -> None:
        self.value = value


@dataclass
class PlanOutcome:
    """State of a plan run: the calls made (with their values), and the returned
    value once a `->value;` statement ran."""

    calls: list[tuple[BoundCall, SkillValue]] = field(default_factory=list)
    returned: bool = False
    value: SkillValue = None


class PlanInterpreter:
    """Keeps the plan's variables between statements. Feed it statements in order."""

    def __init__(
        self,
        executor: SkillExecutor,
        skill_set: SkillSet | None = None,
        on_call: Callable[[BoundCall], ProgressCallback | None] | None = None,
    ) -> None:
        self._executor = executor
        self._skills = skill_set or SkillSet.load(executor.robot_type)
        self._on_call = on_call  # gives a progress callback per call (e.g. ROS feedback)
        self._variables: dict[str, SkillValue] = {}
        self.outcome = PlanOutcome()

    @property
    def variables(self) -> dict[str, SkillValue]:
        return dict(self._variables)

    def run_statement(self, statement: PlanStatement | Stmt) -> PlanOutcome:
        """Execute one top-level statement; after a return, further statements are skipped."""
        if self.outcome.returned:
            return self.outcome
        node = statement.node if isinstance(statement, PlanStatement) else statement
        try:
            self._run(node)
        except _Returned as done:
            self.outcome.returned = True
            self.outcome.value = done.value
        return self.outcome

    def run(self, statements: Iterable[PlanStatement | Stmt]) -> PlanOutcome:
        for statement in statements:
            if self.run_statement(statement).returned:
                break
        return self.outcome

    def _run(self, node: Stmt) -> None:
        if isinstance(node, CallStmt):
            self._call(node.call)
        elif isinstance(node, Assign):
            self._variables[node.var] = self._value(node.value)
        elif isinstance(node, If):
            if self._truth(node.cond):
                for inner in node.body:
                    self._run(inner)
        elif isinstance(node, Loop):
            for _ in range(node.count):
                for inner in node.body:
                    self._run(inner)
        elif isinstance(node, Return):
            raise _Returned(self._value(node.value))
        else:
            raise PlanRuntimeError(f"not a statement: {node!r}")

    def _call(self, call: SkillCall) -> SkillValue:
        args = tuple(self._value(a) for a in call.args)
        try:
            skill = self._skills.validate_call(call.name, args)
        except ValueError as error:
            raise PlanRuntimeError(f"cannot run {call.short}: {error}") from error
        if skill.streamed:  # element by element, as a streaming planner sends them
            for element in skill.elements(args):
                self._execute(BoundCall(call.name, call.short, element))
            return None
        return self._execute(BoundCall(call.name, call.short, args))

    def _execute(self, bound: BoundCall) -> SkillValue:
        progress = self._on_call(bound) if self._on_call else None
        value = self._executor.execute(bound, progress)
        self.outcome.calls.append((bound, value))
        return value

    def _value(self, expr: Expr) -> SkillValue:
        if isinstance(expr, Literal):
            return expr.value
        if isinstance(expr, VarRef):
            if expr.name not in self._variables:
                raise PlanRuntimeError(f"variable {expr.name} is used before it is set")
            return self._variables[expr.name]
        return self._call(expr)

    def _truth(self, cond: Condition) -> bool:
        if isinstance(cond, BoolOp):
            if cond.op == "&":
                return all(self._truth(item) for item in cond.items)
            return any(self._truth(item) for item in cond.items)
        if isinstance(cond, Compare):
            left, right = self._value(cond.left), self._value(cond.right)
            try:
                return bool(_COMPARE[cond.op](left, right))
            except TypeError as error:
                raise PlanRuntimeError(f"cannot compare {left!r} {cond.op} {right!r}") from error
        return bool(self._value(cond))
