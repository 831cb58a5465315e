"""The streamed-argument skill's tool (Conveyor's partial execution): each element
of a streamed call (a leg of the drone's `fp` path) is checked the moment it is
decoded and handed on for the robot, which starts the first leg while the next
ones are still being written.

An element goes on only when the call is a statement of its own outside every
block (one inside a conditional or loop may never run: it is sent whole, as any
statement, and checked by the robot's guard), its values are literals in range,
and, with `limits`, the leg keeps the drone inside them from where the plan's
earlier statements leave it (`LimitChecker`, as the guard checks the whole
statement later). The first bad element is an error naming it: the service ends
the task there, so no element after it reaches the robot; those before it did.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from robot_models.errors import SkillValidationError
from robot_models.limit_checker import OK, LimitChecker, LimitVerdict
from robot_models.parser import PlanParser
from robot_models.plan_ast import CallStmt, Literal, SkillCall
from robot_models.safety_limits import SafetyLimits
from robot_models.skills import Skill, SkillSet, SkillValue
from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply, Unresolved


@dataclass(frozen=True)
class _Statement:
    """What `LimitChecker.check` reads: a statement's node and text."""

    node: CallStmt
    text: str


@dataclass
class _CallState:
    before: str  # the plan text before the call
    epoch: int  # the task's rollbacks when the call began (a later one: a new call)
    streams: bool  # a top-level statement: its elements go to the robot as they come
    checker: LimitChecker | None  # where the plan before the call leaves the robot
    sent: int = 0  # elements handed on
    failed: bool = False


class StreamedPath(ToolPlugin):
    """Options: `robot_type` ("drone"); `limits`, the robot's `SafetyLimits` (a
    mapping) to check each element against before it goes (none: ranges only)."""

    streams = True
    partial = True
    validates = True

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self._skills = SkillSet.load(str(options.get("robot_type", "")), streamed=True)
        raw = options.get("limits")
        self._limits = None if raw is None else SafetyLimits.model_validate(raw)
        if self._limits is not None:
            self._limits.check_for(self._skills)
        streamed = [s for s in self._skills.skills if s.streamed]
        if not streamed:
            raise ValueError(f"the {self._skills.robot_type} has no streamed skill")
        self.skills = frozenset(  # type: ignore[misc]
            name for s in streamed for name in (s.name, s.short)
        )
        self._calls: dict[tuple[str, int], _CallState] = {}

    def on_partial(self, call: ToolCall) -> ToolReply:
        return self._on(call)

    def on_call(self, call: ToolCall) -> ToolReply:
        return self._on(call)

    def on_task_end(self, task_id: str) -> None:
        for key in [k for k in self._calls if k[0] == task_id]:
            del self._calls[key]

    def _on(self, call: ToolCall) -> ToolReply:
        skill = self._skills.get(call.skill)
        state = self._calls.get((call.task_id, call.index))
        if state is None or (state.before, state.epoch) != (call.before, call.epoch):
            state = self._calls[(call.task_id, call.index)] = self._start(call)
        if state.failed:
            return ToolReply.ok()  # the task ends with the first error
        reply = self._check(call, skill, state)
        state.failed = reply.kind == "error"
        return reply

    def _start(self, call: ToolCall) -> _CallState:
        """A call's state from the plan text before it."""
        before = call.before
        parser = PlanParser(self._skills)
        try:
            statements = parser.feed(before)
        except ValueError:
            return _CallState(before, call.epoch, streams=False, checker=None)  # parser says why
        end = statements[-1].end if statements else 0
        top_level = not before[end:].strip()
        checker = None
        if self._limits is not None:
            checker = LimitChecker(self._limits, self._skills)
            for statement in statements:  # a violation there ends the task anyway
                checker.check(statement)
        return _CallState(before, call.epoch, streams=top_level, checker=checker)

    def _check(self, call: ToolCall, skill: Skill, state: _CallState) -> ToolReply:
        width = len(skill.args)
        for index, value in enumerate(call.args[state.sent * width :], start=state.sent * width):
            problem = self._value_problem(skill, index, value)
            if problem:
                return ToolReply.error(problem, argument=index)
        if call.complete:
            problem = skill.arity_problem(len(call.args))
            if problem:
                return ToolReply.error(f"{skill.signature()} {problem}")
        if not state.streams:
            return ToolReply.ok()
        values: list[SkillValue] = [v for v in call.args if not isinstance(v, Unresolved)]
        ready = skill.elements(values)
        texts: list[str] = []
        for number in range(state.sent, len(ready)):
            verdict = self._verdict(skill, values[: (number + 1) * width], state)
            if verdict.status == "violation":
                return ToolReply.error(f"safety limit {verdict.message}", argument=number * width)
            if verdict.status == "approval":  # held whole for an operator, never streamed
                state.streams = False
                return ToolReply.ok()
            texts.append(f"{skill.short}({','.join(str(v) for v in ready[number])})")
        state.sent = len(ready)
        return ToolReply.elements(texts) if texts else ToolReply.ok()

    def _value_problem(self, skill: Skill, index: int, value: object) -> str:
        if index >= skill.max_args():
            return f"{skill.signature()} takes at most {skill.max_elements} elements"
        spec = skill.arg_spec(index)
        leg = index // len(skill.args) + 1
        if isinstance(value, Unresolved):
            return f"{skill.short} leg {leg} {spec.name}: {value.text!r} is not a literal"
        try:
            self._skills.validate_arg(skill, spec, value)  # type: ignore[arg-type]
        except SkillValidationError as exc:
            return f"leg {leg}: {exc}"
        return ""

    def _verdict(self, skill: Skill, values: list[SkillValue], state: _CallState) -> LimitVerdict:
        """The robot's limits on the path's legs so far (the newest one decides: the
        earlier passed), from where the plan before the call leaves the robot."""
        if state.checker is None:
            return OK
        node = CallStmt(SkillCall(skill.name, skill.short, tuple(Literal(v) for v in values)))
        text = f"{skill.short}({','.join(str(v) for v in values)})"
        return copy.copy(state.checker).check(_Statement(node, text))
