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

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lrtrace.errors import LrtraceError
from lrtrace.outputs import write_atomically
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


class TaskRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    task_id: str
    trace_id: int
    agent_id: str
    robot_type: str
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
    engine_busy_s: float | None = None
    interrupted: bool = False
    tasks: list[TaskRecord] = Field(default_factory=list)


class ResultsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["lrtrace-results"] = RESULTS_FORMAT
    version: Literal[1] = RESULTS_VERSION
    workload: WorkloadSpec
    trace_path: str = ""
    runs: list[RunRecord] = Field(default_factory=list)

    @property
    def simulated(self) -> bool:
        return any(r.simulated for r in self.runs)


def write(results: ResultsFile, path: Path) -> None:
    """Atomic write (a Ctrl-C during the write leaves the previous file intact)."""
    write_atomically(path, results.model_dump_json(indent=1).encode(), "results")


def read(path: Path) -> ResultsFile:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise LrtraceError(f"cannot read results {path}: {err.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise LrtraceError(f"{path}: truncated or malformed results file ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != RESULTS_FORMAT:
        raise LrtraceError(f"{path}: not an lrtrace results file")
    try:
        return ResultsFile.model_validate(doc)
    except ValidationError as err:
        raise LrtraceError(f"{path}: invalid results: {one_line(err)}") from None
