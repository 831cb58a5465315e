"""A trace for a fleet of N robots of a mix: the capacity planner's workload.

Like `compose` for one workload spec, but per robot type: the type's events are a
Poisson stream at (robots of the type) x `events_per_s`, each starting 1..max tasks
(capped at the type's robot count) on distinct robots of the type, trace ids drawn
uniformly from the type's. Every type draws from its own generator seeded by (seed,
the type's position in the mix), so the same seed gives the same arrivals pattern
per type at every fleet size (common random numbers across the sizes a search tries).
"""

from __future__ import annotations

import numpy as np
from pydantic import ValidationError

from lrtrace.catalog import Catalog
from lrtrace.errors import LrtraceError
from lrtrace.fleet_mix import FleetMix
from lrtrace.trace_format import Agent, TraceFile, TraceTask, one_line
from lrtrace.workload import WorkloadSpec
from timely_core.scheduling.tuf import Tuf

Drawn = list[tuple[int, int, int]]  # one event's tasks: (trace id, robot number, task seed)


def _arrivals(
    mix: FleetMix, rtype: str, robots: int, duration_s: float, seed: int, index: int
) -> list[tuple[float, Drawn]]:
    """One type's events: (time, its tasks)."""
    group = mix.robots[rtype]
    rng = np.random.default_rng([seed, index])
    rate = robots * group.events_per_s
    burst = min(group.max_tasks_per_event, robots)
    events: list[tuple[float, Drawn]] = []
    t = 0.0
    while True:
        t += float(rng.exponential(1.0 / rate))
        if t >= duration_s:
            return events
        count = int(rng.integers(1, burst + 1))
        ids = [group.trace_ids[int(k)] for k in rng.integers(0, len(group.trace_ids), count)]
        who = rng.permutation(robots)[:count]
        seeds = rng.integers(0, 2**63 - 1, count)
        events.append(
            (t, [(i, int(r) + 1, int(s)) for i, r, s in zip(ids, who, seeds, strict=True)])
        )


def compose_fleet(
    mix: FleetMix, robots: int, duration_s: float, seed: int, catalog: Catalog
) -> TraceFile:
    """The trace of a fleet of `robots` robots of `mix` over `duration_s` seconds."""
    if robots < 1:
        raise LrtraceError(f"a fleet has at least one robot, got {robots}")
    counts = mix.counts(robots)
    agents = [
        Agent(agent_id=f"{rtype}{n}", robot_type=rtype)
        for rtype, count in counts.items()
        for n in range(1, count + 1)
    ]
    merged: list[tuple[float, int, str, Drawn]] = []
    for index, (rtype, count) in enumerate(counts.items()):
        if count:
            for t, drawn in _arrivals(mix, rtype, count, duration_s, seed, index):
                merged.append((t, index, rtype, drawn))
    merged.sort(key=lambda e: (e[0], e[1]))
    tasks: list[TraceTask] = []
    for event, (t, _, rtype, drawn) in enumerate(merged):
        for trace_id, robot_no, task_seed in drawn:
            spec = catalog[trace_id]
            tasks.append(
                TraceTask(
                    task_id=f"t{len(tasks):06d}",
                    trace_id=trace_id,
                    agent_id=f"{rtype}{robot_no}",
                    robot_type=rtype,
                    urgency=spec.urgency,
                    tuf=Tuf.preset(spec.urgency),
                    instruction=spec.instruction,
                    scene=spec.scene,
                    arrival_s=round(t, 6),
                    event=event,
                    seed=task_seed,
                )
            )
    return TraceFile(
        workload=_workload(mix, counts, duration_s, seed), agents=tuple(agents), tasks=tuple(tasks)
    )


def _workload(mix: FleetMix, counts: dict[str, int], duration_s: float, seed: int) -> WorkloadSpec:
    """What the trace file records as its workload: the fleet's totals (event rate
    over all types, widest burst, every trace id, the largest type's robot count)."""
    present = [t for t, n in counts.items() if n]
    try:
        return WorkloadSpec(
            name=f"{mix.name} x{sum(counts.values())}",
            eps=sum(counts[t] * mix.robots[t].events_per_s for t in present),
            max_tpe=max(min(mix.robots[t].max_tasks_per_event, counts[t]) for t in present),
            trace_ids=tuple(sorted({i for t in present for i in mix.robots[t].trace_ids})),
            agents=max(counts.values()),
            duration_s=duration_s,
            seed=seed,
        )
    except ValidationError as err:
        raise LrtraceError(
            f"a fleet of {sum(counts.values())} robots of {mix.name}: {one_line(err)}"
        ) from None
