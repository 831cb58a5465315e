"""Scoring a planner (the base, or the base with a variant's adapter) on a variant's
held-out examples: exact plans under greedy decoding with HF transformers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from robot_models.dataset import Example
from robot_models.evaluate import greedy_plans
from robot_models.plan_check import check_plan
from robot_models.reference_planner import ReferencePlanner


@dataclass(frozen=True)
class VariantScore:
    total: int
    exact: int
    valid: int

    @property
    def exact_rate(self) -> float:
        return self.exact / max(1, self.total)


def score(base: Path, adapter: Path | None, heldout: Sequence[Example]) -> VariantScore:
    """Exact and valid plans of `base` (+ `adapter`, merged) on `heldout`."""
    planner = ReferencePlanner(base, adapter=adapter)
    plans = greedy_plans(planner, heldout)
    exact = sum(1 for (plan, _), e in zip(plans, heldout, strict=True) if plan == e.plan)
    valid = sum(
        1
        for (plan, ended), e in zip(plans, heldout, strict=True)
        if check_plan(e.robot_type, plan, ended).valid
    )
    return VariantScore(len(heldout), exact, valid)
