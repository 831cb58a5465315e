"""Skill calls as text: plan AST -> `Skill` message fields, and `Skill.args` -> values.

Arguments travel as literal text (`100`, `'cat'`, `True`) so any robot can read
them; a reference to a variable or a nested call travels as its source text.
"""

from __future__ import annotations

import ast
from typing import Any

from robot_models.plan_ast import Literal, SkillCall, VarRef
from robot_models.skills import SkillValue


def expr_text(expr: Any) -> str:
    """Source text of an argument expression."""
    if isinstance(expr, Literal):
        value = expr.value
        if isinstance(value, str):
            return f"'{value}'"
        return repr(value)
    if isinstance(expr, VarRef):
        return expr.name
    if isinstance(expr, SkillCall):
        return call_text(expr)
    raise TypeError(f"not a plan expression: {expr!r}")


def call_text(call: SkillCall) -> str:
    return f"{call.name}({', '.join(expr_text(a) for a in call.args)})"


class ArgumentError(ValueError):
    """An argument text that is not a literal value."""


def parse_arg(text: str) -> SkillValue:
    """Literal argument text -> value; ArgumentError naming the text otherwise."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        raise ArgumentError(f"argument {text!r} is not a literal value") from None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ArgumentError(f"argument {text!r} is not a number, string or boolean")
