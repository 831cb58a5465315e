"""The results file: what happened to every task of a replay, per policy run.

Times are seconds on the replay clock, whose zero is the trace's zero, so a task's
`arrival_s` equals its arrival in the trace. Per segment we keep the four instants
of the paper's Fig. 6 timeline (emitted by the planner, dispatched to the robot,
execution start and end); every metric is derived from them (`lrtrace.metrics`), so
results from the service, ROS 2 and the simulator are computed the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from lrtrace.errors import LrtraceError
from lrtrace.file_kinds import what_is
from lrtrace.outputs import write_atomically
from lrtrace.problems import Problems
from lrtrace.trace_format import one_line
from lrtrace.workload import WorkloadSpec
from timely_core.engine.protocol import HandlingStrategy
from timely_core.scheduling.tuf import Tuf

RESULTS_FORMAT: Final = "lrtrace-results"
RESULTS_VERSION: Final = 1
Target = Literal["service", "sim", "ros"]


class SegmentRecord(BaseModel):
    # times on the replay's clock: finite (a NaN response would score a utility the
    # run never earned)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    index: int = Field(ge=0)
    text: str
    statements: int = Field(ge=0)
    emitted_s: float  # the planner produced it
    dispatched_s: float  # sent to the robot (after the network latency)
    exec_start_s: float
    exec_end_s: float

    @model_validator(mode="after")
    def _forward(self, info: ValidationInfo) -> SegmentRecord:
        """A file's execution does not end before it starts (a negative execution time
        would shorten the waiting time reported). Checked on load only: a live replay
        records what its robots reported."""
        if _loading(info) and self.exec_end_s < self.exec_start_s:
            raise ValueError(
                f"the execution ends before it starts ({self.exec_end_s:g} s < "
                f"{self.exec_start_s:g} s)"
            )
        return self


class TaskRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    task_id: str
    trace_id: int
    agent_id: str
    robot_type: str
    variant: str = ""  # the fleet variant its agent planned with; "": the base model
    urgency: Literal["normal", "urgent"]
    tuf: Tuf
    arrival_s: float
    segments: list[SegmentRecord] = Field(default_factory=list)
    plan_text: str = ""
    success: bool = False
    finished: bool = False  # False: the run was interrupted before the task ended
    error: str = ""


class RunRecord(BaseModel):
    """One policy's replay of the trace on one target."""

    model_config = ConfigDict(extra="forbid")

    label: str  # policy, or policy@max_batch for batch-size sweeps
    policy: str
    target: Target
    engine: str  # "torch:<checkpoint>", "simulated:<profile>", "ros:<action>"
    simulated: bool  # True: virtual-time simulation, not a measurement
    profile: str = ""
    max_batch: int | None = None  # the cap asked for (sweeps); None: the target's default
    # the cap the run used, the default included; None where the target cannot tell
    # (ros) and in files written before it
    batch_cap: int | None = None
    # the service's KV handling strategy for suspended generations (the policy's own
    # for lamps, infercept, vllm-like) and whether it prefetched swapped KV; None where
    # the target cannot tell (ros: the planner's config) and in files written before
    handling_strategy: HandlingStrategy | None = None
    kv_prefetch: bool | None = None
    network_latency_s: float = 0.008
    wall_s: float = 0.0
    # seconds the engine spent in iterations (replay clock: virtual for the simulator);
    # None where the target cannot see its engine (ros) and in files written before it
    engine_busy_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    interrupted: bool = False
    tasks: list[TaskRecord] = Field(default_factory=list)

    @property
    def shown_label(self) -> str:
        """The label as tables, notes and figures show it: a run cut short by Ctrl-C
        says so, or its partial numbers would pass for a whole run's."""
        return f"{self.label} (interrupted)" if self.interrupted else self.label


class ResultsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["lrtrace-results"] = RESULTS_FORMAT
    version: Literal[1] = RESULTS_VERSION
    workload: WorkloadSpec
    trace_path: str = ""
    runs: list[RunRecord] = Field(default_factory=list)

    @model_validator(mode="after")
    def _labels_once(self, info: ValidationInfo) -> ResultsFile:
        """Where runs are told apart by label (a report's rows, figures and notes), each
        label names one run; a hand-merged file may repeat one (`record` takes it)."""
        if info.context and info.context.get("distinct_labels"):
            seen: set[str] = set()
            for i, run in enumerate(self.runs):
                if run.label in seen:
                    raise Problems(
                        [f"runs.{i}.label: run label {run.label!r} appears twice; relabel one"]
                    )
                seen.add(run.label)
        return self

    @property
    def simulated(self) -> bool:
        return any(r.simulated for r in self.runs)


def _loading(info: ValidationInfo) -> bool:
    """Whether the model is validated from a file (`read`), not built by a replay."""
    return bool(info.context and info.context.get("file"))


def write(results: ResultsFile, path: Path) -> None:
    """Atomic write (a Ctrl-C during the write leaves the previous file intact)."""
    write_atomically(path, results.model_dump_json(indent=1).encode(), "results")


def read(path: Path, distinct_labels: bool = False) -> ResultsFile:
    """The results file at `path`; `distinct_labels`: refuse one whose runs share a
    label (`report`, which tells runs apart by label)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise LrtraceError(f"cannot read results {path}: {err.strerror}") from None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise LrtraceError(
            _not_results(path, data) or f"{path}: truncated or malformed results file ({err})"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != RESULTS_FORMAT:
        raise LrtraceError(_not_results(path, data) or f"{path}: not an lrtrace results file")
    context = {"file": True, "distinct_labels": distinct_labels}
    try:
        return ResultsFile.model_validate(doc, context=context)
    except ValidationError as err:
        raise LrtraceError(f"{path}: invalid results: {one_line(err)}") from None


def _not_results(path: Path, data: bytes) -> str | None:
    """`<path>: not an lrtrace results file: it looks like <what it is>`, when
    `file_kinds` can tell; None otherwise."""
    kind = what_is(data)
    return f"{path}: not an lrtrace results file: it looks like {kind}" if kind else None
