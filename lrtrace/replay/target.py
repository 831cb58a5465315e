"""What every replay target offers the runner: run one policy over a trace."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from lrtrace.results_format import Target, TaskRecord
from lrtrace.trace_format import TraceFile
from timely_core.engine.protocol import HandlingStrategy
from timely_core.scheduling.policies.registry import POLICY_NAMES

POLICIES: tuple[str, ...] = POLICY_NAMES  # the service's own names, so they never drift


class ReplayTarget(Protocol):
    kind: Target
    engine: str  # how the results file names the engine
    simulated: bool
    profile: str

    def batch_cap(self, max_batch: int | None) -> int | None:
        """The cap on generations per iteration a run given `max_batch` uses (the
        target's default when None); None where the target cannot tell."""

    def check(self, trace: TraceFile) -> None:
        """Raise LrtraceError, naming the tasks, for a trace this target cannot replay
        (before any run starts); every target refuses tasks on a robot of another type
        than their catalog task's (`lrtrace.replay.task_check`)."""

    def kv_settings(self, policy: str) -> tuple[HandlingStrategy | None, bool | None]:
        """(the KV handling strategy, KV prefetch) a run of `policy` uses; None where
        the target cannot tell."""

    def run(
        self,
        trace: TraceFile,
        policy: str,
        max_batch: int | None,
        records: list[TaskRecord],
        on_task_done: Callable[[TaskRecord], None],
        stop: threading.Event,
    ) -> float | None:
        """Replay `trace` under `policy`, appending one record per task to `records`
        up front and completing them as tasks end (so an interrupted run still has
        them). Returns when every task ended or `stop` is set, with the seconds the
        engine spent in iterations (None where the target cannot see its engine)."""
