"""One training/evaluation example: a robot type, what it sees, the task, the plan."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    robot_type: str
    scene: str
    instruction: str
    plan: str
    family: str  # which template produced it (for per-family evaluation)
