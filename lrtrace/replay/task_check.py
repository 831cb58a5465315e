"""The pre-check every replay target runs: each catalog task on a robot of its type.

A trace's task is tied to its agent's robot type (the trace validates that), but not
to the robot type of the catalog task its trace id names: a hand-edited trace can put
a drone task on an arm. The sim target would then replay the drone's golden plan on
the arm and the service or a ROS 2 planner would plan a drone instruction for an arm,
each failing (or worse, succeeding meaninglessly) only at run time, so every target
refuses such a trace before the first run starts.
"""

from __future__ import annotations

from lrtrace.catalog import Catalog, load_catalog
from lrtrace.errors import LrtraceError
from lrtrace.problems import a_or_an, listing
from lrtrace.trace_format import TraceFile


def check_robot_types(trace: TraceFile, catalog: Catalog | None = None) -> None:
    """Raise LrtraceError naming each task whose catalog task (by trace id) is of
    another robot type than its agent: the task, its type, the agent and the agent's
    type. Trace ids the catalog does not know are left to the targets."""
    catalog = catalog or load_catalog()
    agent_types = {a.agent_id: a.robot_type for a in trace.agents}
    wrong: list[str] = []
    for i, task in enumerate(trace.tasks):
        if task.trace_id not in catalog:
            continue
        task_type = catalog[task.trace_id].robot_type
        agent_type = agent_types.get(task.agent_id, task.robot_type)
        if task_type != agent_type:
            wrong.append(
                f"tasks.{i}.agent_id ({task.task_id}): trace {task.trace_id} is "
                f"{a_or_an(task_type)} task but its agent {task.agent_id} is "
                f"{a_or_an(agent_type)}"
            )
    if wrong:
        raise LrtraceError(
            "tasks on robots of another type (each needs an agent of its task's robot "
            f"type): {listing(wrong)}"
        )
