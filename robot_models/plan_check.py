"""Scoring a generated plan: is it valid, and does it use only its robot's skills."""

from __future__ import annotations

import re
from dataclasses import dataclass

from robot_models.language import load_language

_CALL_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(")
_QUOTED = re.compile(r"'[^'\n]*'")  # a name inside a string argument is no call


@dataclass(frozen=True)
class PlanCheck:
    valid: bool  # parses completely, at least one statement, every call valid
    right_skills: bool  # every called name is a skill of this robot type
    error: str


def check_plan(robot_type: str, text: str, ended: bool = True) -> PlanCheck:
    """`ended` is False when generation stopped at the token limit instead of EOS."""
    language = load_language(robot_type)
    names = set(_CALL_NAME.findall(_QUOTED.sub("''", text)))
    right = all(language.skill_set.find(name) is not None for name in names)
    if not ended:
        return PlanCheck(False, right, "no end of plan (EOS) within the token limit")
    try:
        statements = language.parse(text)
    except ValueError as error:
        return PlanCheck(False, right, str(error))
    if not statements:
        return PlanCheck(False, right, "empty plan")
    return PlanCheck(True, right, "")
