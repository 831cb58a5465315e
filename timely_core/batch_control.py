"""Latency-guided batch size (TimelyLLM §4.4): admit more generations only while the
most urgent running one still meets its budget and KV memory allows.

No offline profiling: the generation speed is measured from the last few engine
iterations (each running generation gains one token per iteration), and the worst
case of a segment is bounded by the maximum segment length (paper: 10 tokens).
Its effect on speed shows one iteration later ("a lag for one generation"), so at
most `admit_per_step` generations join a non-empty batch per scheduling point.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

# Paper §7: maximum token length of a segment for adaptive batching.
DEFAULT_WCET_SEGMENT_TOKENS = 10


@dataclass(frozen=True)
class RunningBudget:
    """A running generation as the batch controller sees it."""

    deadline_s: float  # when its current segment should be dispatched
    segment_tokens: int  # tokens generated in its current segment so far


class LatencyGuidedBatch:
    def __init__(
        self,
        wcet_segment_tokens: int = DEFAULT_WCET_SEGMENT_TOKENS,
        window: int = 8,
        admit_per_step: int = 1,
    ) -> None:
        if wcet_segment_tokens < 1:
            raise ValueError(f"wcet_segment_tokens must be >= 1, got {wcet_segment_tokens}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if admit_per_step < 1:
            raise ValueError(f"admit_per_step must be >= 1, got {admit_per_step}")
        self.wcet_segment_tokens = wcet_segment_tokens
        self.admit_per_step = admit_per_step
        self._iteration_s: deque[float] = deque(maxlen=window)

    def record_iteration(self, duration_s: float) -> None:
        """One engine iteration took `duration_s`; each running generation gained a token."""
        if duration_s > 0:
            self._iteration_s.append(duration_s)

    def tokens_per_s(self) -> float | None:
        """Recent generation speed of one generation, or None before any iteration."""
        if not self._iteration_s:
            return None
        return len(self._iteration_s) / sum(self._iteration_s)

    def wcet_s(self, segment_tokens: int) -> float:
        """Worst-case time to finish a segment that has `segment_tokens` tokens so far."""
        speed = self.tokens_per_s()
        if speed is None:
            return 0.0
        remaining = max(self.wcet_segment_tokens - segment_tokens, 1)
        return remaining / speed

    def may_admit(self, now_s: float, running: list[RunningBudget], admitted: int) -> bool:
        """Whether one more generation may join. `running` includes the ones admitted
        at this scheduling point (`admitted` of them). Generations already past their
        deadline are not protected: holding the batch back cannot save them."""
        live = [r for r in running if r.deadline_s > now_s]
        if not live:
            return True
        if admitted >= self.admit_per_step:
            return False
        most_urgent = min(live, key=lambda r: r.deadline_s)
        return now_s + self.wcet_s(most_urgent.segment_tokens) <= most_urgent.deadline_s
