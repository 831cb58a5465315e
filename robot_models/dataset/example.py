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

    def pieces(self) -> list[tuple[str, bool]]:
        """The plan as the service sees it arrive, in order: (text, is_observation),
        empty pieces left out; each piece is encoded on its own."""
        pieces: list[tuple[str, bool]] = []
        cut = 0
        for start, end in self.observed:
            pieces += [(self.plan[cut:start], False), (self.plan[start:end], True)]
            cut = end
        pieces.append((self.plan[cut:], False))
        return [(text, observed) for text, observed in pieces if text]
