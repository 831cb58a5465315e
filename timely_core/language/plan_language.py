"""What the service needs to know about a robot's plan language, and nothing more.

`timely_core` knows no robot: `robot_models` implements these protocols per robot
type (skill set, grammar, execution-time model) and the service is handed one
`PlanLanguage` per registered robot. This keeps the dependency pointing one way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class PlanStatement(Protocol):
    """A complete, executable statement of a plan (one or more skill calls)."""

    @property
    def text(self) -> str:
        """The statement exactly as decoded (including its terminator)."""


class StreamingStatementParser(Protocol):
    """Parses a plan as it streams out of the decoder, one chunk at a time."""

    def feed(self, text: str) -> Sequence[PlanStatement]:
        """Append `text`; return statements completed by it, in order. A statement is
        reported only once it can no longer change. Raises `ValueError` (the
        language's syntax error is a subclass) on text that can never be valid."""

    def close(self) -> Sequence[PlanStatement]:
        """End of output: return any statement completed by the end itself, or raise
        `ValueError` if the text ends in the middle of a statement."""


@runtime_checkable
class PlanLanguage(Protocol):
    """One robot type's plan language and execution-time model."""

    @property
    def robot_type(self) -> str: ...

    def prompt_prefix(self) -> str:
        """The fixed part of every prompt for this robot type (skill set, language
        guidance, worked examples). Prefilled once and pinned (Teola)."""

    def format_request(self, scene: str, instruction: str) -> str:
        """The per-request part that follows the prefix. The model was trained on
        ids = encode(prefix) + encode(request) + encode(plan) + [eos], so callers
        tokenize the two parts separately and concatenate the ids."""

    def new_parser(self) -> StreamingStatementParser: ...

    def estimate_execution_s(self, statements: Sequence[PlanStatement]) -> tuple[float, float]:
        """(minimum, mean) execution time of these statements on the robot; the
        scheduler plans with the minimum so the next segment is ready in time."""


@runtime_checkable
class FailureObservation(Protocol):
    """Optional for a `PlanLanguage` (plans that react): how a robot's failure of a
    segment reads in the plan language, appended to the generation as an
    observation. Without it the service writes `<segment> failed: <error>`."""

    def failure_observation(self, segment_text: str, error: str) -> str:
        """One line: the failed statements (as decoded) and the robot's error."""


@runtime_checkable
class SkillNames(Protocol):
    """Optional for a `PlanLanguage`: the names its plans call skills by, so a tool
    registered for a skill these plans never call (a typo, another robot type's
    skill) is refused instead of silently never being called."""

    def skill_names(self) -> frozenset[str]:
        """Every name a call in these plans may have (short forms and full names)."""
