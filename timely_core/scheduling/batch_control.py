"""Latency-guided batch size (TimelyLLM §4.4): admit more generations only while the
running generations that can still meet their budget keep meeting it.

No offline profiling. The worst case of a segment is bounded by the maximum segment
length (paper: 10 tokens); the time per token comes from the last few engine
iterations (each running generation gains one token per iteration). WCET =
remaining tokens x iteration time. Two refinements over the paper's single check of
the most urgent generation:
- the iteration time of a batch one larger is predicted by a least-squares line
  through the recent (batch size, iteration time) pairs; until two batch sizes have
  been seen the marginal cost is unknown, so at most `admit_per_step` generations
  join per scheduling point and the next iteration shows their effect (the paper's
  "lag for one generation");
- a generation that cannot meet its budget even at the current speed (already
  late by the WCET bound) is protected, until its deadline, only from a candidate
  that can wait that long: one that would still meet its own deadline if admitted
  at the late generation's deadline, by the same WCET bound. A normal task with a
  second of slack then waits the few iterations an urgent segment needs instead
  of adding its prefill and decode to each of them, while another urgent task,
  which cannot wait, joins at once: holding it back would not save the late
  generation, only make the candidate late as well. (The paper checks only the
  most urgent running generation; with its 10-token bound an urgent first segment
  never "meets" a 0.2 s budget, so nothing would protect it.) The bound is the
  paper's, so for a longer segment (a normal drone plan's opening conditional) the
  wait is underestimated and a deferred candidate can miss its deadline slightly:
  urgent utility is bought with a little normal utility. Measured trade-off:
  docs/design-notes.md, "Latency-guided batch".
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
        window: int = 16,
        admit_per_step: int = 1,
    ) -> None:
        if wcet_segment_tokens < 1:
            raise ValueError(f"wcet_segment_tokens must be >= 1, got {wcet_segment_tokens}")
        if window < 2:
            raise ValueError(f"window must be >= 2, got {window}")
        if admit_per_step < 1:
            raise ValueError(f"admit_per_step must be >= 1, got {admit_per_step}")
        self.wcet_segment_tokens = wcet_segment_tokens
        self.admit_per_step = admit_per_step
        self._samples: deque[tuple[int, float]] = deque(maxlen=window)
        self._fit: tuple[float, float] | None = None  # (intercept, slope) per batch size
        self._mean_s = 0.0

    def record_iteration(self, duration_s: float, batch_size: int = 1) -> None:
        """One engine iteration over `batch_size` generations took `duration_s`."""
        if duration_s <= 0 or batch_size < 1:
            return
        self._samples.append((batch_size, duration_s))
        self._refit()

    def _refit(self) -> None:
        n = len(self._samples)
        sum_x = sum(b for b, _ in self._samples)
        sum_y = sum(d for _, d in self._samples)
        self._mean_s = sum_y / n
        mean_x = sum_x / n
        var_x = sum((b - mean_x) ** 2 for b, _ in self._samples)
        if var_x == 0:
            # One batch size in the window (a steady batch between bursts): its level
            # is known, the marginal cost keeps the last fitted slope. Without a slope
            # the next burst would join one generation per iteration (the "lag for
            # one"), delaying the first segments of all but its first task
            # (docs/design-notes.md, "Latency-guided batch").
            if self._fit is not None:
                slope = self._fit[1]
                self._fit = (self._mean_s - slope * mean_x, slope)
            return
        cov = sum((b - mean_x) * (d - self._mean_s) for b, d in self._samples)
        slope = max(cov / var_x, 0.0)
        self._fit = (self._mean_s - slope * mean_x, slope)

    def iteration_s(self, batch_size: int) -> float | None:
        """Predicted time of one iteration over `batch_size` generations."""
        if not self._samples:
            return None
        if self._fit is None:
            return self._mean_s
        intercept, slope = self._fit
        return max(intercept + slope * batch_size, self._mean_s * 0.1)

    def wcet_s(self, segment_tokens: int, batch_size: int | None = None) -> float:
        """Worst-case time to finish a segment that has `segment_tokens` tokens so far,
        in a batch of `batch_size` (default: the recent mean iteration time)."""
        per_token = self._mean_s if batch_size is None else self.iteration_s(batch_size)
        if not per_token:
            return 0.0
        return max(self.wcet_segment_tokens - segment_tokens, 1) * per_token

    def may_admit(
        self,
        now_s: float,
        running: list[RunningBudget],
        admitted: int,
        candidate_deadline_s: float | None = None,
    ) -> bool:
        """Whether one more generation may join. `running` includes the ones admitted
        at this scheduling point (`admitted` of them); `candidate_deadline_s` is when
        the candidate's own segment should be dispatched (None: unknown, so only the
        generations that can meet their budget are protected)."""
        if not running:
            return True
        if self._fit is None and admitted >= self.admit_per_step:
            return False
        size = len(running)
        for r in running:
            if now_s + self.wcet_s(r.segment_tokens, size + 1) <= r.deadline_s:
                continue  # keeps its budget with one more
            if now_s + self.wcet_s(r.segment_tokens, size) <= r.deadline_s:
                return False  # it meets its budget only without the candidate
            if (
                candidate_deadline_s is not None
                and now_s < r.deadline_s
                and r.deadline_s + self.wcet_s(0, size) <= candidate_deadline_s
            ):
                return False  # late; the candidate can wait out its deadline (by the bound)
        return True
