"""The trace file: a versioned msgpack document of agents and timed task arrivals.

A trace is self-contained (instruction, scene and TUF are copied in), so it replays
the same way on any target, and it is validated with pydantic on load so a malformed
or truncated file is rejected with one line naming the problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

import msgpack
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lrtrace.errors import LrtraceError
from lrtrace.outputs import write_atomically
from lrtrace.workload import WorkloadSpec
from timely_core.scheduling.tuf import Tuf

TRACE_FORMAT: Final = "lrtrace-trace"
TRACE_VERSION: Final = 1


class Agent(BaseModel):
    """One robot of the fleet; ids are valid ROS 2 / service robot ids."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: str = Field(pattern=r"^[A-Za-z0-9_]{1,64}$")
    robot_type: str = Field(min_length=1, max_length=32)


class TraceTask(BaseModel):
    """One task arrival: which robot asks for which LRTrace task, when, how urgently."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    trace_id: int = Field(ge=1)
    agent_id: str
    robot_type: str
    urgency: Literal["normal", "urgent"]
    tuf: Tuf
    instruction: str = Field(min_length=1)
    scene: str = ""
    arrival_s: float = Field(ge=0, allow_inf_nan=False)
    event: int = Field(ge=0)
    seed: int = Field(ge=0, lt=2**63, description="seeds this task's simulated executions")


class TraceFile(BaseModel):
    """The whole trace; tasks sorted by arrival time, agents distinct within an event."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["lrtrace-trace"] = TRACE_FORMAT
    version: Literal[1] = TRACE_VERSION
    workload: WorkloadSpec
    agents: tuple[Agent, ...] = Field(min_length=1)
    tasks: tuple[TraceTask, ...]

    @model_validator(mode="after")
    def _consistent(self) -> TraceFile:
        types = {a.agent_id: a.robot_type for a in self.agents}
        if len(types) != len(self.agents):
            raise ValueError("agent ids must be distinct")
        seen_ids: set[str] = set()
        last = 0.0
        for t in self.tasks:
            if types.get(t.agent_id) != t.robot_type:
                raise ValueError(f"task {t.task_id}: agent {t.agent_id!r} is not a {t.robot_type}")
            if t.task_id in seen_ids:
                raise ValueError(f"task id {t.task_id} appears twice")
            if t.arrival_s < last:
                raise ValueError(f"task {t.task_id}: arrivals must be in time order")
            seen_ids.add(t.task_id)
            last = t.arrival_s
        return self


def one_line(err: ValidationError) -> str:
    """The first validation problem as `field.path: message (+N more)`."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "document"
    more = f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def dumps(trace: TraceFile) -> bytes:
    return msgpack.packb(trace.model_dump(mode="json"), use_bin_type=True)


def write(trace: TraceFile, path: Path) -> None:
    """Write atomically, so an interrupted write never leaves a half trace behind."""
    write_atomically(path, dumps(trace), "trace")


def loads(data: bytes, source: str = "trace") -> TraceFile:
    if data.lstrip()[:1] in (b"{", b"["):
        raise LrtraceError(
            f"{source}: not an lrtrace trace: it looks like JSON (a trace is msgpack, "
            "written by `lrtrace compose`)"
        )
    try:
        doc = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except msgpack.ExtraData as extra:
        # the first value decoded; text or another file may start with a number
        if not _is_trace(getattr(extra, "unpacked", None)):  # (not in msgpack's stubs)
            raise LrtraceError(
                f"{source}: not an lrtrace trace (a trace is msgpack, written by `lrtrace compose`)"
            ) from None
        raise LrtraceError(
            f"{source}: malformed trace file (trailing bytes after the document)"
        ) from None
    except (ValueError, TypeError) as err:  # msgpack: "Unpack failed: incomplete input", ...
        why = str(err) or type(err).__name__
        raise LrtraceError(f"{source}: truncated or malformed trace file ({why})") from None
    if not _is_trace(doc):
        raise LrtraceError(f"{source}: not an lrtrace trace (no 'format: {TRACE_FORMAT}' header)")
    if doc.get("version") != TRACE_VERSION:
        raise LrtraceError(
            f"{source}: trace version {doc.get('version')!r} is not supported "
            f"(this lrtrace reads version {TRACE_VERSION})"
        )
    try:
        return TraceFile.model_validate(doc)
    except ValidationError as err:
        raise LrtraceError(f"{source}: invalid trace: {one_line(err)}") from None


def _is_trace(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("format") == TRACE_FORMAT


def read(path: Path) -> TraceFile:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise LrtraceError(f"cannot read trace {path}: {err.strerror}") from None
    return loads(data, str(path))
