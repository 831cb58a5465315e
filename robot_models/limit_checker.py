"""`LimitChecker`: one task's plan checked against its robot's `SafetyLimits`, one
complete top-level statement at a time, before the statement is sent.

It tracks where the commanded moves take the robot from the task's start
(`PoseBounds`), so it is stateful: one checker per task, fed every statement in
order. Each statement gets a `LimitVerdict`: ok, violation (naming the limit, the
statement and the value) or approval (an operator must approve it first).

What the text cannot tell is decided conservatively, never guessed:
- a conditional's block may or may not run: the pose after it covers both;
- `&`/`|` conditions short-circuit: calls after the first comparison may not run;
- loops have literal counts (the grammar has no other kind): they are unrolled;
- a turn of unknown angle (`sweep`, `orient`, a variable angle) makes the heading
  unknown: later horizontal moves may then go any way and are checked as such;
- a move of unknown extent (`approach`, a variable or call as a distance, an arm
  target that is not literal) is a violation whenever a limit it could break is
  set, with a message saying why; without such limits it is fine;
- forbidden and approval skills count wherever they appear in the statement,
  also in a block that may not run.
A statement that breaks a limit is not applied: the task ends with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from robot_models.plan_ast import (
    Assign,
    BoolOp,
    CallStmt,
    Compare,
    Condition,
    Expr,
    If,
    Loop,
    Return,
    SkillCall,
    Stmt,
    calls_in,
)
from robot_models.pose_bounds import TAKEOFF_ALTITUDE_CM, PoseBounds
from robot_models.safety_limits import Box, SafetyLimits
from robot_models.skill_motion import motion_of
from robot_models.skills import SkillSet

VerdictStatus = Literal["ok", "violation", "approval"]


@dataclass(frozen=True)
class LimitVerdict:
    """What a statement may do. `message` says it whole, for errors and operators."""

    status: VerdictStatus
    limit: str = ""  # e.g. "geofence_cm.x_min", "forbidden_skills", "approval_skills"
    statement: str = ""
    value: str = ""  # what broke it (or needs approval), e.g. "x could reach -100 cm"

    @property
    def message(self) -> str:
        if self.status == "ok":
            return ""
        return f"{self.limit}: {self.value} in statement {self.statement!r}"


OK = LimitVerdict("ok")


class _Breach(Exception):
    def __init__(self, limit: str, value: str) -> None:
        self.limit = limit
        self.value = value


@dataclass
class _Walk:
    distance_cm: float = 0.0  # path commanded so far in this statement


class LimitChecker:
    """Checks one task's statements in order (one checker per task)."""

    def __init__(self, limits: SafetyLimits, skill_set: SkillSet) -> None:
        self._limits = limits.check_for(skill_set)
        self._skills = skill_set
        self._robot_type = skill_set.robot_type
        self._forbidden = {skill_set.get(n).name for n in limits.forbidden_skills}
        self._approval = {skill_set.get(n).name for n in limits.approval_skills}
        self._pose = PoseBounds()

    @property
    def pose(self) -> PoseBounds:
        """Where the robot can be after the statements checked so far."""
        return self._pose

    def check(self, statement: object) -> LimitVerdict:
        """Check the next statement (a parsed `PlanStatement`, or anything with its
        `.node` and `.text`); on ok or approval its moves are applied."""
        node: Stmt | None = getattr(statement, "node", None)
        if node is None:
            raise TypeError(f"expected a parsed plan statement with .node, got {statement!r}")
        text = str(getattr(statement, "text", "")).strip()
        calls = list(calls_in(node))
        for call in calls:
            if call.name in self._forbidden:
                return LimitVerdict(
                    "violation", "forbidden_skills", text, f"{call.short} is forbidden"
                )
        try:
            pose = self._stmt(node, self._pose, _Walk())
        except _Breach as breach:
            return LimitVerdict("violation", breach.limit, text, breach.value)
        self._pose = pose
        needing = sorted({c.short for c in calls if c.name in self._approval})
        if needing:
            return LimitVerdict(
                "approval",
                "approval_skills",
                text,
                f"{', '.join(needing)} needs an operator's approval",
            )
        return OK

    # --- the statement's effect on the pose ------------------------------------------

    def _stmt(self, node: Stmt, pose: PoseBounds, walk: _Walk) -> PoseBounds:
        if isinstance(node, CallStmt):
            return self._call(node.call, pose, walk)
        if isinstance(node, (Assign, Return)):
            return self._expr(node.value, pose, walk)
        if isinstance(node, If):
            pose = self._cond(node.cond, pose, walk)
            return pose.hull(self._block(node.body, pose, walk))
        if isinstance(node, Loop):
            for _ in range(node.count):
                pose = self._block(node.body, pose, walk)
            return pose
        raise TypeError(f"not a statement: {node!r}")

    def _block(self, body: tuple[Stmt, ...], pose: PoseBounds, walk: _Walk) -> PoseBounds:
        for inner in body:
            pose = self._stmt(inner, pose, walk)
        return pose

    def _cond(self, cond: Condition, pose: PoseBounds, walk: _Walk) -> PoseBounds:
        if isinstance(cond, BoolOp):
            pose = self._cond(cond.items[0], pose, walk)
            for item in cond.items[1:]:  # may be skipped by short-circuit
                pose = pose.hull(self._cond(item, pose, walk))
            return pose
        if isinstance(cond, Compare):
            return self._expr(cond.right, self._expr(cond.left, pose, walk), walk)
        return self._expr(cond, pose, walk)

    def _expr(self, expr: Expr, pose: PoseBounds, walk: _Walk) -> PoseBounds:
        return self._call(expr, pose, walk) if isinstance(expr, SkillCall) else pose

    def _call(self, call: SkillCall, pose: PoseBounds, walk: _Walk) -> PoseBounds:
        for arg in call.args:  # arguments are evaluated first
            pose = self._expr(arg, pose, walk)
        motion = motion_of(self._robot_type, call.name)
        args = call.literal_args()
        number = args[0] if args else None
        known = isinstance(number, (int, float)) and not isinstance(number, bool)
        if motion.kind == "move":
            if not known:
                self._unknowable(call, "its distance is only known when it runs")
                return pose
            distance = float(number)  # type: ignore[arg-type]
            walk.distance_cm += distance
            self._check_distance(_render(call), walk)
            forward, left, up = (distance * d for d in motion.direction)
            return self._checked(pose.moved(forward, left, up), _render(call))
        if motion.kind == "path":
            return self._path(call, args, pose, walk)
        if motion.kind == "turn":
            angle = float(number) * motion.direction[0] if known else None  # type: ignore[arg-type]
            return pose.turned(angle)
        if motion.kind == "turn_unknown":
            return pose.turned(None)
        if motion.kind == "takeoff":
            return self._checked(
                pose.at_altitude(TAKEOFF_ALTITUDE_CM, at_least=True), _render(call)
            )
        if motion.kind == "land":
            return pose.at_altitude(0.0, at_least=False)  # never blocked: landing is safe
        if motion.kind == "move_unknown":
            self._unknowable(call, "where it flies is only known when it runs")
            return pose
        if motion.kind == "arm_target":
            self._check_arm_target(call, args)
        return pose

    def _path(
        self,
        call: SkillCall,
        args: tuple[object, ...] | None,
        pose: PoseBounds,
        walk: _Walk,
    ) -> PoseBounds:
        """A streamed path: each leg in turn, so the first leg that breaks a limit is
        named (its elements before it were fine: a streamed skill may have sent them)."""
        if args is None:
            self._unknowable(call, "its legs are only known when it runs")
            return pose
        skill = self._skills.get(call.name)
        for number, leg in enumerate(skill.elements(args), start=1):  # type: ignore[arg-type]
            forward, left, up = (float(v) for v in leg)  # type: ignore[arg-type]
            where = f"{_render(call)} leg {number} ({','.join(str(v) for v in leg)})"
            walk.distance_cm += math.hypot(forward, left, up)
            self._check_distance(where, walk)
            pose = self._checked(pose.moved(forward, left, up), where)
        return pose

    # --- the limits -------------------------------------------------------------------

    def _unknowable(self, call: SkillCall, why: str) -> None:
        limits = self._limits
        for field in ("geofence_cm", "max_altitude_cm", "max_distance_cm"):
            if getattr(limits, field) is not None:
                raise _Breach(
                    field,
                    f"{_render(call)} may move the robot, but {why}, so it cannot be "
                    f"checked against {field} before it runs",
                )

    def _check_distance(self, where: str, walk: _Walk) -> None:
        limit = self._limits.max_distance_cm
        if limit is not None and walk.distance_cm > limit:
            raise _Breach(
                "max_distance_cm",
                f"the statement commands {walk.distance_cm:g} cm of moves by {where}, "
                f"more than {limit:g} cm",
            )

    def _checked(self, pose: PoseBounds, where: str) -> PoseBounds:
        """`pose` (after the move `where` names) inside the altitude and geofence."""
        may = "would " if pose.exact else "could "
        limit = self._limits.max_altitude_cm
        if limit is not None and pose.z.hi > limit:
            raise _Breach(
                "max_altitude_cm",
                f"{where}: altitude {may}reach {pose.z.hi:g} cm, above {limit:g} cm",
            )
        fence = self._limits.geofence_cm
        if fence is not None:
            _inside(fence, pose, f"{where}: ", may, "geofence_cm", "cm")
        return pose

    def _check_arm_target(self, call: SkillCall, args: tuple[object, ...] | None) -> None:
        box = self._limits.workspace_mm
        if box is None:
            return
        if args is None:
            raise _Breach(
                "workspace_mm",
                f"{_render(call)}: its target is only known when it runs, so it cannot "
                "be checked against workspace_mm before it runs",
            )
        x, y, z = (float(a) for a in args)  # type: ignore[arg-type]
        for axis, value in zip("xyz", (x, y, z), strict=True):
            lo, hi = box.bounds(axis)
            if value < lo:
                raise _Breach(
                    f"workspace_mm.{axis}_min", f"{_render(call)}: {axis} {value:g} mm < {lo:g} mm"
                )
            if value > hi:
                raise _Breach(
                    f"workspace_mm.{axis}_max", f"{_render(call)}: {axis} {value:g} mm > {hi:g} mm"
                )


def checker_factory(limits: SafetyLimits, skill_set: SkillSet) -> Callable[[], LimitChecker]:
    """A new checker per task (the planning service's per-robot `guard`); the limits
    are checked against the skill set now, so a bad configuration fails at start."""
    limits.check_for(skill_set)
    return lambda: LimitChecker(limits, skill_set)


def _inside(fence: Box, pose: PoseBounds, where: str, may: str, name: str, unit: str) -> None:
    for axis in "xyz":
        lo, hi = fence.bounds(axis)
        reach = pose.axis(axis)
        if reach.lo < lo:
            raise _Breach(
                f"{name}.{axis}_min",
                f"{where}{axis} {may}reach {reach.lo:g} {unit}, below {lo:g} {unit}",
            )
        if reach.hi > hi:
            raise _Breach(
                f"{name}.{axis}_max",
                f"{where}{axis} {may}reach {reach.hi:g} {unit}, beyond {hi:g} {unit}",
            )


def _render(call: SkillCall) -> str:
    args = call.literal_args()
    if args is None:
        return f"{call.short}(...)"
    return f"{call.short}({','.join(repr(a) if isinstance(a, str) else str(a) for a in args)})"
