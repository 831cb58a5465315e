"""Measured executions back to the robot's execution-time model (the hook of
`segment_done`).

`timely_core` knows no robot: a robot type's execution-time model lives behind its
`PlanLanguage` (`estimate_execution_s`, which the scheduler plans with). A language
that can also learn implements `ExecutionFeedback`; the service then tells it how
long each reported segment took, so the estimates of later segments, of this task
and the next ones, follow what the robots really do.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from timely_core.language.plan_language import PlanStatement
from timely_core.serving.generation import Generation

log = logging.getLogger(__name__)


@runtime_checkable
class ExecutionFeedback(Protocol):
    """Optional for a `PlanLanguage`: learns from measured executions."""

    def observe_execution(self, statements: Sequence[PlanStatement], duration_s: float) -> None:
        """The robot executed these statements (one segment) in `duration_s`."""


def report_execution(generation: Generation, index: int) -> None:
    """Tell the generation's language how long segment `index` took, when that is
    known (`Generation.measured_execution_s`). A failing language is logged: the
    robot's report itself has been taken."""
    language = generation.language
    if not isinstance(language, ExecutionFeedback):
        return
    duration_s = generation.measured_execution_s(index)
    if duration_s is None:
        return
    try:
        language.observe_execution(generation.records[index].segment.statements, duration_s)
    except Exception:
        log.exception("%s: observe_execution failed", generation.task_id)
