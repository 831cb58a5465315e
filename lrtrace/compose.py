"""Compose a trace from a workload spec: Poisson events, 1..MaxTPE tasks per event on
distinct agents, trace ids drawn uniformly (TimelyLLM §6, "programmable trace
composition"). Everything is drawn from one seeded generator, so a spec and a seed
always give the same trace."""

from __future__ import annotations

import numpy as np

from lrtrace.catalog import Catalog
from lrtrace.errors import LrtraceError
from lrtrace.trace_format import Agent, TraceFile, TraceTask
from lrtrace.workload import WorkloadSpec
from timely_core.scheduling.tuf import Tuf


def agents_for(spec: WorkloadSpec, catalog: Catalog) -> list[Agent]:
    """`spec.agents` robots of each robot type the workload's tasks need."""
    types = sorted({catalog[i].robot_type for i in spec.trace_ids})
    return [
        Agent(agent_id=f"{rtype}{n}", robot_type=rtype)
        for rtype in types
        for n in range(1, spec.agents + 1)
    ]


def compose(spec: WorkloadSpec, catalog: Catalog) -> TraceFile:
    """The trace of `spec`; raises LrtraceError for an impossible workload."""
    tasks_by_type: dict[str, list[int]] = {}
    for trace_id in spec.trace_ids:
        tasks_by_type.setdefault(catalog[trace_id].robot_type, []).append(trace_id)
    if spec.max_tpe > spec.agents:
        there = "is only 1 agent" if spec.agents == 1 else f"are only {spec.agents} agents"
        raise LrtraceError(
            f"workload {spec.name}: {spec.max_tpe} tasks per event need distinct agents, "
            f"but there {there} per robot type"
        )
    agents = agents_for(spec, catalog)
    rng = np.random.default_rng(spec.seed)
    tasks: list[TraceTask] = []
    t = 0.0
    event = 0
    while True:
        t += float(rng.exponential(1.0 / spec.eps))
        if t >= spec.duration_s:
            break
        count = int(rng.integers(1, spec.max_tpe + 1))
        trace_ids = [spec.trace_ids[int(k)] for k in rng.integers(0, len(spec.trace_ids), count)]
        # Distinct agents within an event, drawn per robot type.
        chosen: dict[str, list[int]] = {}
        for rtype in tasks_by_type:
            need = sum(1 for i in trace_ids if catalog[i].robot_type == rtype)
            chosen[rtype] = [int(a) for a in rng.permutation(spec.agents)[:need]]
        for trace_id in trace_ids:
            task = catalog[trace_id]
            agent_no = chosen[task.robot_type].pop()
            tasks.append(
                TraceTask(
                    task_id=f"t{len(tasks):05d}",
                    trace_id=trace_id,
                    agent_id=f"{task.robot_type}{agent_no + 1}",
                    robot_type=task.robot_type,
                    urgency=task.urgency,
                    tuf=Tuf.preset(task.urgency),
                    instruction=task.instruction,
                    scene=task.scene,
                    arrival_s=round(t, 6),
                    event=event,
                    seed=int(rng.integers(0, 2**63 - 1)),
                )
            )
        event += 1
    return TraceFile(workload=spec, agents=tuple(agents), tasks=tuple(tasks))
