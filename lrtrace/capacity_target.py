"""The service-level target a fleet must meet, and whether one replay met it.

Judged per task class (`urgency-robot_type`, the report's classes), from the
per-task metrics lrtrace already computes (`lrtrace.metrics.task_metrics`):

- an urgent class meets the target when at least `urgent_full_share` of its tasks
  are *at full utility*: their time utility equals the TUF's maximum (beta), which
  holds exactly when the response time (arrival -> first action starts on the robot,
  network included) is at most the TUF's expected response time (urgent: 0.2 s);
- a normal class meets it when its tasks' mean utility is at least
  `normal_utility_share` of their maximum (the report's "% max util").

A task that did not complete (failed, rejected, not finished) counts as utility 0,
not at full utility: the report leaves such tasks out of its means, a target must not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from lrtrace.metrics import task_metrics
from lrtrace.results_format import TaskRecord

FULL_UTILITY_TOLERANCE = 1e-9  # float slack when comparing a utility with its maximum

Rule = Literal["median", "all"]
"""How seeds combine: `median` - each class's median value over the seeds meets its
threshold; `all` - every seed meets every threshold."""


class CapacityTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    urgent_full_share: float = Field(default=0.95, ge=0, le=1, allow_inf_nan=False)
    normal_utility_share: float = Field(default=0.90, ge=0, le=1, allow_inf_nan=False)

    @model_validator(mode="after")
    def _asks_something(self) -> CapacityTarget:
        if self.urgent_full_share == 0 and self.normal_utility_share == 0:
            raise ValueError("the target asks nothing (both thresholds are 0): any fleet meets it")
        return self

    def threshold(self, urgency: str) -> float:
        return self.urgent_full_share if urgency == "urgent" else self.normal_utility_share

    def describe(self) -> str:
        return (
            f"{100 * self.urgent_full_share:g}% of urgent tasks at full utility, normal tasks "
            f"at {100 * self.normal_utility_share:g}% of maximum utility"
        )


@dataclass(frozen=True)
class ClassValue:
    """One task class in one replay: what the target judges, and the plain mean."""

    task_class: str
    urgency: str
    tasks: int
    completed: int
    value: float  # urgent: share at full utility; normal: mean utility / maximum
    mean_utility: float  # over all tasks, incomplete ones at 0


def class_values(records: Sequence[TaskRecord]) -> dict[str, ClassValue]:
    """Per task class of the replay (classes with no task are absent)."""
    groups: dict[str, list[TaskRecord]] = {}
    for rec in records:
        groups.setdefault(f"{rec.urgency}-{rec.robot_type}", []).append(rec)
    out: dict[str, ClassValue] = {}
    for cls, recs in sorted(groups.items()):
        urgency = recs[0].urgency
        utilities, maxima, full = [], [], 0
        completed = 0
        for rec in recs:
            m = task_metrics(rec)
            maxima.append(rec.tuf.initial_utility)
            if m is None:
                utilities.append(0.0)
                continue
            completed += 1
            utilities.append(m.utility)
            full += m.utility >= m.max_utility - FULL_UTILITY_TOLERANCE
        share = full / len(recs) if urgency == "urgent" else sum(utilities) / sum(maxima)
        out[cls] = ClassValue(cls, urgency, len(recs), completed, share, float(np.mean(utilities)))
    return out


def meets(
    target: CapacityTarget, per_seed: Sequence[dict[str, ClassValue]], rule: Rule
) -> tuple[bool, dict[str, float]]:
    """Whether replays of one fleet (one per seed) meet the target under `rule`, and
    each class's value as judged (the median over the seeds that had the class, or
    the worst seed under `all`). A class absent from a seed's trace is not judged
    on that seed; a class with a threshold of 0 never fails."""
    judged: dict[str, float] = {}
    ok = True
    for cls in sorted({c for seed in per_seed for c in seed}):
        values = [seed[cls].value for seed in per_seed if cls in seed]
        urgency = next(seed[cls].urgency for seed in per_seed if cls in seed)
        value = float(np.median(values)) if rule == "median" else min(values)
        judged[cls] = value
        ok = ok and value >= target.threshold(urgency) - FULL_UTILITY_TOLERANCE
    return ok, judged
