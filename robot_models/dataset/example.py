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
    # (start, end) characters of `plan` that are observations the service appends
    # (a robot's failure, `dataset/observations.py`): input, never written by the planner
    observed: tuple[tuple[int, int], ...] = ()
