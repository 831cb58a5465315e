"""The two documented failures of a plan: bad syntax and bad skill use.

Both subclass `ValueError`, which is what `timely_core.language.plan_language` promises its
callers; anything else escaping the parser is a bug.
"""

from __future__ import annotations


class PlanSyntaxError(ValueError):
    """The text can never become a valid plan. `position` is the 0-based character
    offset of the offending character (or the end of the text), `expected` says what
    the grammar would have accepted there."""

    def __init__(self, position: int, expected: str, found: str) -> None:
        self.position = position
        self.expected = expected
        self.found = found
        super().__init__(
            f"plan syntax error at character {position}: expected {expected}, found {found}"
        )


class SkillValidationError(ValueError):
    """A call names an unknown skill or passes an argument the skill does not accept.
    `allowed` describes the accepted values (a range, a type, or the known skills)."""

    def __init__(self, skill: str, argument: str, allowed: str, problem: str) -> None:
        self.skill = skill
        self.argument = argument
        self.allowed = allowed
        self.problem = problem
        where = f"skill '{skill}'" + (f", argument '{argument}'" if argument else "")
        super().__init__(f"{where}: {problem} (allowed: {allowed})")


class PlanRuntimeError(ValueError):
    """A plan that parsed but cannot run: an unset variable, a comparison of values
    that cannot be compared, or a skill call whose resolved arguments are invalid."""
