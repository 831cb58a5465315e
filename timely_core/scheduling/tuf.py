"""Time-utility functions (TimelyLLM Eq. 1) and the per-segment TUF0/TUF1."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

UrgencyPreset = Literal["normal", "urgent"]
MAX_RESPONSE_TIME_S = 86_400.0  # a day
MAX_SLOPE = 1e6  # utility lost per second, at most
MAX_UTILITY = 1e6


class Tuf(BaseModel):
    """`TUF(t) = min(beta, alpha * (t - ERT) + beta)`, floored at 0.

    t is a response (waiting) time in seconds. Utility is flat at `initial_utility`
    (beta) until the expected response time (ERT), then falls at `slope` (alpha).
    The paper's curves reach 0 and stop mattering there, so we floor at 0: a task
    far past its deadline has no utility left to gain, not negative utility.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True
    )  # a client's "1" or True is a mistake

    # bounded so priorities (utility over slack) stay finite whatever a client sends
    expected_response_time_s: float = Field(gt=0, le=MAX_RESPONSE_TIME_S, allow_inf_nan=False)
    slope: float = Field(le=0, ge=-MAX_SLOPE, allow_inf_nan=False)
    initial_utility: float = Field(gt=0, le=MAX_UTILITY, allow_inf_nan=False)

    @classmethod
    def normal(cls) -> Tuf:
        """ERT 1.0 s, beta 1, alpha -2: utility reaches 0 at 1.5 s."""
        return cls(expected_response_time_s=1.0, slope=-2.0, initial_utility=1.0)

    @classmethod
    def urgent(cls) -> Tuf:
        """ERT 0.2 s, beta 2, alpha -6.67: utility reaches 0 at 0.5 s."""
        return cls(expected_response_time_s=0.2, slope=-6.67, initial_utility=2.0)

    @classmethod
    def preset(cls, name: UrgencyPreset) -> Tuf:
        if name == "normal":
            return cls.normal()
        if name == "urgent":
            return cls.urgent()
        raise ValueError(f"unknown urgency preset {name!r}; expected 'normal' or 'urgent'")

    def utility(self, t_s: float) -> float:
        """TUF0: utility of the first segment after waiting `t_s` seconds (a NaN wait
        is refused: `min` would give it the full utility)."""
        _check_wait(t_s)
        u = min(
            self.initial_utility,
            self.slope * (t_s - self.expected_response_time_s) + self.initial_utility,
        )
        return max(u, 0.0)

    def resumed_utility(self, t_s: float) -> float:
        """TUF1: `min(beta, alpha * max(t, 0) + beta)` for later segments, t measured
        from the estimated end of the previous segment's execution (ERT 0)."""
        _check_wait(t_s)
        u = min(self.initial_utility, self.slope * max(t_s, 0.0) + self.initial_utility)
        return max(u, 0.0)

    def zero_utility_time_s(self) -> float:
        """Response time at which TUF0 reaches 0 (inf for a flat TUF)."""
        if self.slope == 0:
            return float("inf")
        return self.expected_response_time_s + self.initial_utility / -self.slope


def _check_wait(t_s: float) -> None:
    if math.isnan(t_s):
        raise ValueError("a TUF's wait must be a number of seconds, got NaN")
