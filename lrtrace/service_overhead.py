"""The planning service's own time per engine iteration, measured on the real service.

Between two engine steps the service schedules, parses every new token, dispatches
segments and delivers them; the engine waits through all of it. In virtual time that
work takes no time, so a simulator on an engine-only profile is optimistic near
capacity. Measured with this module and stored in the profile
(`LatencyProfile.service_overhead_s`), it is added to each simulated iteration: on
this CPU about 0.6 ms per iteration (the replay's robot bookkeeping, which runs in
the deliveries, included), against engine steps of a few milliseconds.

A short replay of a contended drone workload (the paper's WID 1 shape) under each
policy on the in-process service with the real engine: (loop busy - engine busy) /
engine iterations, from `ServiceStats`; the profile keeps the mean over policies.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.errors import LrtraceError
from lrtrace.replay.targets.service import ServiceTarget
from lrtrace.results_format import TaskRecord
from lrtrace.workload import WorkloadSpec

POLICIES = ("fcfs", "timely")


def workload(eps: float, duration_s: float) -> WorkloadSpec:
    """Drone tasks as in WID 1 (1-8 per event, traces 1-8, 25 agents) at `eps`."""
    return WorkloadSpec(
        name="service-overhead probe",
        eps=eps,
        max_tpe=8,
        trace_ids=tuple(range(1, 9)),
        agents=25,
        duration_s=duration_s,
    )


@dataclass(frozen=True)
class OverheadSample:
    policy: str
    iterations: int
    loop_busy_s: float
    engine_busy_s: float

    @property
    def per_iteration_s(self) -> float:
        return max(0.0, self.loop_busy_s - self.engine_busy_s) / self.iterations


def measure_overhead(
    target: ServiceTarget,
    spec: WorkloadSpec,
    policies: Sequence[str] = POLICIES,
    progress: Callable[[str], None] = lambda _: None,
) -> list[OverheadSample]:
    trace = compose(spec, load_catalog())
    samples = []
    for policy in policies:
        progress(f"service overhead: {policy}, {len(trace.tasks)} tasks over {spec.duration_s:g} s")
        records: list[TaskRecord] = []
        target.run(trace, policy, None, records, lambda _: None, threading.Event())
        stats = target.last_stats
        if stats is None or stats.iterations == 0:
            raise LrtraceError(f"service overhead: the {policy} replay ran no engine iteration")
        samples.append(
            OverheadSample(policy, stats.iterations, stats.loop_busy_s, stats.engine_busy_s)
        )
    return samples


def describe(samples: Sequence[OverheadSample], spec: WorkloadSpec) -> str:
    """For the profile's derivation."""
    parts = ", ".join(
        f"{s.policy} {s.per_iteration_s * 1e3:.2f} ms over {s.iterations} iterations"
        for s in samples
    )
    return (
        f"service overhead per iteration (loop busy - engine busy, real service, "
        f"{spec.eps:g} events/s of WID 1-shaped drone tasks for {spec.duration_s:g} s): "
        f"{parts}; mean kept"
    )
