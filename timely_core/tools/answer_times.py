"""How long a tool takes to answer a call, per (robot, tool): a running mean and
spread of the measured durations (sent -> reply), so that a generation waiting on
an answer has a predicted wait (LAMPS: the durations of one API type vary little).

Before any reply the prediction is the tool's declared `ToolSpec.expected_s`, if
any; the first measured reply replaces that prior, later ones refine it.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from dataclasses import dataclass

from timely_core.running_mean import RunningMean

DEFAULT_ANSWER_CV = 0.25  # the spread assumed until a tool has a few replies


@dataclass
class AnswerStats(RunningMean):
    """Running mean and variance of one tool's answer times, in seconds."""

    prior_s: float | None = None  # the spec's expected_s, until a reply is measured

    @property
    def expected_s(self) -> float | None:
        """The predicted answer time; None with neither a reply nor a prior."""
        if self.samples:
            return self.mean
        return self.prior_s

    @property
    def cv(self) -> float:
        return self.spread(DEFAULT_ANSWER_CV)


class AnswerTimes:
    """Per (robot id, tool name) answer statistics; fed from tools' reader threads."""

    def __init__(self) -> None:
        self._stats: dict[tuple[str, str], AnswerStats] = {}
        self._lock = threading.Lock()

    def declare(self, robot_id: str, tool: str, expected_s: float | None) -> None:
        """A tool was (re)registered: its statistics start over from `expected_s`."""
        with self._lock:
            self._stats[(robot_id, tool)] = AnswerStats(prior_s=expected_s)

    def forget(self, robot_id: str, tool: str) -> None:
        with self._lock:
            self._stats.pop((robot_id, tool), None)

    def observe(self, robot_id: str, tool: str, duration_s: float) -> None:
        """A reply measured `duration_s` after its call was sent."""
        if not math.isfinite(duration_s) or duration_s < 0:
            raise ValueError(f"tool {tool!r}: answer time must be >= 0 s, got {duration_s}")
        with self._lock:
            self._stats.setdefault((robot_id, tool), AnswerStats()).add(duration_s)

    def stats(self, robot_id: str, tool: str) -> AnswerStats:
        """A copy of the statistics (empty for a tool never declared nor measured)."""
        with self._lock:
            return dataclasses.replace(self._stats.get((robot_id, tool), AnswerStats()))

    def expected_s(self, robot_id: str, tool: str) -> float | None:
        return self.stats(robot_id, tool).expected_s
