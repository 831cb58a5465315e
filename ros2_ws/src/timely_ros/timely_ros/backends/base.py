"""What a skill-execution backend does: run one validated skill call, or stop."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from robot_models.skills import Skill, SkillSet, SkillValue

Progress = Callable[[float, str], None]  # (fraction of this skill done, status text)


class SkillFailed(Exception):
    """The robot could not execute a skill; the message is the robot's reason."""


class Backend(Protocol):
    @property
    def skill_set(self) -> SkillSet: ...

    def run(
        self, skill: Skill, args: tuple[SkillValue, ...], stop: threading.Event, progress: Progress
    ) -> str:
        """Execute one call; return its value as text ("" for none). Returns early
        when `stop` is set; raises SkillFailed with the robot's reason."""

    def halt(self) -> None:
        """Stop moving now (called from the cancel callback, concurrently with run)."""

    def close(self) -> None: ...
