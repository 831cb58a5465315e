"""The LRTrace task catalog (Table 2): what each trace id asks of which robot.

The tasks themselves (instruction, scene, golden plan) live in `robot_models.dataset`
next to the planner trained on them; this module only adapts them to what composing
and simulating a trace need, so lrtrace never keeps a second copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from lrtrace.errors import LrtraceError

Urgency = Literal["normal", "urgent"]


@dataclass(frozen=True)
class TaskSpec:
    """One LRTrace task: the request a robot sends and the plan it should get."""

    trace_id: int
    robot_type: str
    urgency: Urgency
    instruction: str
    scene: str
    golden_plan: str
    title: str = ""

    @property
    def task_class(self) -> str:
        """The paper's categories: normal / urgent drone, complex arm (and others)."""
        return f"{self.urgency}-{self.robot_type}"


class Catalog:
    """Trace id -> task, with the one-line error for an unknown id."""

    def __init__(self, tasks: Iterable[TaskSpec]) -> None:
        self._tasks: dict[int, TaskSpec] = {}
        for t in tasks:
            if t.trace_id in self._tasks:
                raise LrtraceError(f"trace id {t.trace_id} appears twice in the catalog")
            self._tasks[t.trace_id] = t

    def __getitem__(self, trace_id: int) -> TaskSpec:
        try:
            return self._tasks[trace_id]
        except KeyError:
            known = ", ".join(str(i) for i in sorted(self._tasks))
            raise LrtraceError(f"unknown trace id {trace_id}; known ids: {known}") from None

    def __contains__(self, trace_id: object) -> bool:
        return trace_id in self._tasks

    def ids(self) -> list[int]:
        return sorted(self._tasks)

    def tasks(self) -> list[TaskSpec]:
        return [self._tasks[i] for i in self.ids()]

    def by_plan_request(self) -> Mapping[tuple[str, str], TaskSpec]:
        """(scene, instruction) -> task: how a simulated engine recognises a prompt."""
        return {(t.scene, t.instruction): t for t in self._tasks.values()}


def load_catalog() -> Catalog:
    """The 11 LRTrace tasks from `robot_models.dataset`."""
    from robot_models.dataset import LRTRACE_TASKS

    return Catalog(
        TaskSpec(
            trace_id=t.trace_id,
            robot_type=t.robot_type,
            urgency=t.urgency,
            instruction=t.instruction,
            scene=t.scene,
            golden_plan=t.golden_plan,
            title=t.name,
        )
        for t in LRTRACE_TASKS
    )
