"""The parsed form of a plan: expressions, statements, and the top-level
`PlanStatement` the segmenter hands to the robot.

Grammar (whitespace between tokens is ignored):

    plan      := statement*
    statement := call ';' | VAR '=' expr ';' | '?' cond '{' statement* '}'
               | INT '{' statement* '}' | '->' expr ';'
    call      := NAME '(' [expr (',' expr)*] ')'
    cond      := compare (('&' | '|') compare)*
    compare   := expr [('==' | '!=' | '<' | '<=' | '>' | '>=') expr]
    expr      := INT | FLOAT | STRING | 'True' | 'False' | VAR | call
    NAME      := skill short form or full name, e.g. mf, move_forward
    VAR       := '_' [A-Za-z0-9_]*          STRING := '...' (no quote inside)

Example: `tu(90);mf(100);?iv('cat')==True{o('cat');a('cat');}`. A conditional
has no else branch, so a statement is final the moment its `;` or `}` arrives.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from robot_models.skills import SkillValue


@dataclass(frozen=True)
class Literal:
    value: SkillValue


@dataclass(frozen=True)
class VarRef:
    name: str


@dataclass(frozen=True)
class SkillCall:
    """A call of a skill: `name` is the canonical skill name, `short` its short form."""

    name: str
    short: str
    args: tuple[Expr, ...]

    def literal_args(self) -> tuple[SkillValue, ...] | None:
        """The argument values if all are literals (known before execution)."""
        if all(isinstance(a, Literal) for a in self.args):
            return tuple(a.value for a in self.args)  # type: ignore[union-attr]
        return None


Expr = Literal | VarRef | SkillCall


@dataclass(frozen=True)
class Compare:
    left: Expr
    op: str
    right: Expr


@dataclass(frozen=True)
class BoolOp:
    """`&` or `|` over comparisons, evaluated left to right with short-circuit."""

    op: str
    items: tuple[Compare | Expr, ...]


Condition = Compare | BoolOp | Expr


@dataclass(frozen=True)
class CallStmt:
    call: SkillCall


@dataclass(frozen=True)
class Assign:
    var: str
    value: Expr


@dataclass(frozen=True)
class If:
    cond: Condition
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class Loop:
    count: int
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class Return:
    value: Expr


Stmt = CallStmt | Assign | If | Loop | Return


@dataclass(frozen=True)
class PlanStatement:
    """One complete top-level statement. `text` is exactly the decoded text from the
    end of the previous statement up to and including this one's terminator, so the
    texts of all statements concatenate back to the plan."""

    text: str
    start: int
    end: int
    node: Stmt
    calls: tuple[SkillCall, ...]


def calls_in(node: Stmt | Condition | Expr) -> Iterator[SkillCall]:
    """Every skill call in `node`, in source order (nested calls after their parent)."""
    if isinstance(node, SkillCall):
        yield node
        for arg in node.args:
            yield from calls_in(arg)
    elif isinstance(node, CallStmt):
        yield from calls_in(node.call)
    elif isinstance(node, (Assign, Return)):
        yield from calls_in(node.value)
    elif isinstance(node, Compare):
        yield from calls_in(node.left)
        yield from calls_in(node.right)
    elif isinstance(node, BoolOp):
        for item in node.items:
            yield from calls_in(item)
    elif isinstance(node, If):
        yield from calls_in(node.cond)
        for stmt in node.body:
            yield from calls_in(stmt)
    elif isinstance(node, Loop):
        for stmt in node.body:
            yield from calls_in(stmt)


@dataclass(frozen=True)
class BoundCall:
    """A skill call with its argument values resolved, ready for an executor."""

    name: str  # canonical skill name, e.g. "move_forward"
    short: str  # short form, e.g. "mf"
    args: tuple[SkillValue, ...]

    def __str__(self) -> str:
        return f"{self.short}({','.join(_render(a) for a in self.args)})"


def _render(value: SkillValue) -> str:
    return f"'{value}'" if isinstance(value, str) else str(value)
