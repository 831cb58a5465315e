"""One training/evaluation example: a robot type, what it sees, the task, the plan."""

from __future__ import annotations

from dataclasses import dataclass, replace


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

    def with_pieces(self, pieces: list[tuple[str, bool]], family: str) -> Example:
        """This example with the plan `pieces` join to, (text, is_observation) in
        order as `pieces()` gives them, from `family`."""
        plan, observed = "", []
        for text, is_observation in pieces:
            if is_observation:
                observed.append((len(plan), len(plan) + len(text)))
            plan += text
        return replace(self, plan=plan, family=family, observed=tuple(observed))
