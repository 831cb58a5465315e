"""An exponentially weighted running mean and variance of measurements, and the
spread (coefficient of variation) they imply: how far to trust a prediction made
from them (execution-time ratios, tools' answer times)."""

from __future__ import annotations

import math
from dataclasses import dataclass

ALPHA = 0.2  # weight of the newest measurement
MIN_SAMPLES_FOR_SPREAD = 3  # fewer: the spread is assumed, not measured


@dataclass
class RunningMean:
    mean: float = 0.0  # before any measurement: the prediction to use meanwhile
    var: float = 0.0
    samples: int = 0

    def add(self, value: float) -> None:
        if self.samples == 0:
            self.mean, self.var = value, 0.0
        else:
            delta = value - self.mean
            self.mean += ALPHA * delta
            self.var = (1 - ALPHA) * (self.var + ALPHA * delta * delta)
        self.samples += 1

    def spread(self, assumed: float) -> float:
        """The coefficient of variation; `assumed` until enough measurements."""
        if self.samples < MIN_SAMPLES_FOR_SPREAD or self.mean <= 0:
            return assumed
        return math.sqrt(self.var) / self.mean
