"""Simulated robots: each executes the segments it receives one after another, taking
the time the execution-time model samples for them (TimelyLLM §6: simple skills from
their argument, variable skills sampled from profiled runs), after a fixed network
latency per dispatch (the paper's 8 ms).

One simulated robot serves one task, so the waiting time of a task is the delay due
to planning only, as the paper defines it, even when an agent gets a new task while
a previous one is still executing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from timely_core.language.plan_language import PlanStatement

NETWORK_LATENCY_S = 0.008


class ExecutionSampler(Protocol):
    def sample_s(
        self, robot_type: str, statements: Sequence[PlanStatement], rng: random.Random
    ) -> tuple[float, bool]:
        """(simulated execution time of these statements, whether they returned: a
        plan that executed a return statement runs nothing after it)."""


@dataclass(frozen=True)
class Execution:
    dispatched_s: float
    start_s: float
    end_s: float


@dataclass
class SimulatedRobot:
    robot_type: str
    rng: random.Random
    busy_until_s: float = 0.0
    returned: bool = False
    executions: list[Execution] = field(default_factory=list)

    def execute(
        self,
        emitted_s: float,
        statements: Sequence[PlanStatement],
        sampler: ExecutionSampler,
        network_latency_s: float,
    ) -> Execution:
        """Receive a segment `network_latency_s` after it was emitted and run it as
        soon as the previous one has ended (a robot does one thing at a time)."""
        dispatched = emitted_s + network_latency_s
        start = max(dispatched, self.busy_until_s)
        duration = 0.0
        if not self.returned:
            duration, self.returned = sampler.sample_s(self.robot_type, statements, self.rng)
        end = start + max(0.0, duration)
        self.busy_until_s = end
        ex = Execution(dispatched, start, end)
        self.executions.append(ex)
        return ex
