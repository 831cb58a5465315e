"""The planner's data: the 11 LRTrace tasks with golden plans, and templated
instructions per robot type (seeded, with a held-out split)."""

from robot_models.dataset.build import DEFAULT_SEED, DatasetSplit, build_dataset, generate
from robot_models.dataset.example import Example
from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS, LRTraceTask, lrtrace_task

__all__ = [
    "DEFAULT_SEED",
    "LRTRACE_TASKS",
    "DatasetSplit",
    "Example",
    "LRTraceTask",
    "build_dataset",
    "generate",
    "lrtrace_task",
]
