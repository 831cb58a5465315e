"""The trace file: a versioned msgpack document of agents and timed task arrivals.

A trace is self-contained (instruction, scene and TUF are copied in), so it replays
the same way on any target, and it is validated with pydantic on load so a malformed
or truncated file is rejected naming the problem (a file that decodes but is invalid:
every problem, one per line, each with its place, e.g. `tasks.3.urgency (t00003)`).
A file is also checked against the task catalog (`loads`): a trace id names an
LRTrace task, so an unknown one, or a task whose instruction, scene or urgency is not
its trace id's, would be reported under a task type it is not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

import msgpack
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from lrtrace.catalog import Catalog, load_catalog
from lrtrace.errors import LrtraceError
from lrtrace.outputs import write_atomically
from lrtrace.problems import Problems, a_or_an, listing, validation_problems
from lrtrace.workload import WorkloadSpec
from timely_core.scheduling.tuf import Tuf, UrgencyPreset

TRACE_FORMAT: Final = "lrtrace-trace"
TRACE_VERSION: Final = 1
# a fleet variant's name, as the planner config and the block zoo take it, or "" (none)
VARIANT_PATTERN: Final = r"^(?:[A-Za-z][A-Za-z0-9_.-]{0,63})?$"


class Agent(BaseModel):
    """One robot of the fleet; ids are valid ROS 2 / service robot ids."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: str = Field(pattern=r"^[A-Za-z0-9_]{1,64}$")
    robot_type: str = Field(min_length=1, max_length=32)
    # the fleet variant (fine-tune) it plans with; "": the base model. Written only when
    # set, so a trace without variants is the same file as before variants existed.
    variant: str = Field(default="", pattern=VARIANT_PATTERN)

    @field_validator("variant")
    @classmethod
    def _not_base(cls, variant: str) -> str:
        if variant == "base":
            raise ValueError("'base' names the base model: leave variant empty for it")
        return variant


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
    def _consistent(self, info: ValidationInfo) -> TraceFile:
        """Every problem between agents and tasks, and, given a catalog as validation
        context (`loads`), between tasks and their trace ids, each naming its place (a
        hand-edited trace often has several)."""
        problems: list[str] = []
        first_agent: dict[str, int] = {}
        for i, a in enumerate(self.agents):
            if a.agent_id in first_agent:
                problems.append(
                    f"{_at('agents', i, 'agent_id', a.agent_id)}: agent ids must be distinct "
                    f"(also agents.{first_agent[a.agent_id]})"
                )
            first_agent.setdefault(a.agent_id, i)
        types = {a.agent_id: a.robot_type for a in reversed(self.agents)}  # the first's
        first_task: dict[str, int] = {}
        for i, t in enumerate(self.tasks):
            agent_type = types.get(t.agent_id)
            if agent_type != t.robot_type:
                why = "no such agent" if agent_type is None else f"it is {a_or_an(agent_type)}"
                problems.append(
                    f"{_at('tasks', i, 'agent_id', t.task_id)}: agent {t.agent_id!r} is not "
                    f"{a_or_an(t.robot_type)} ({why})"
                )
            if t.task_id in first_task:
                problems.append(
                    f"{_at('tasks', i, 'task_id', t.task_id)}: task id {t.task_id} appears "
                    f"twice (also tasks.{first_task[t.task_id]})"
                )
            if i and t.arrival_s < self.tasks[i - 1].arrival_s:
                problems.append(
                    f"{_at('tasks', i, 'arrival_s', t.task_id)}: arrivals must be in time "
                    f"order ({t.arrival_s:g} s comes after {self.tasks[i - 1].arrival_s:g} s "
                    f"of tasks.{i - 1})"
                )
            # also bounds times: at 1e15 s, the replay's 20 ms steps vanish in float precision
            if t.arrival_s > self.workload.duration_s:
                problems.append(
                    f"{_at('tasks', i, 'arrival_s', t.task_id)}: arrives at {t.arrival_s:g} s, "
                    f"after the workload's duration_s ({self.workload.duration_s:g} s)"
                )
            first_task.setdefault(t.task_id, i)
        catalog = (info.context or {}).get("catalog")
        if isinstance(catalog, Catalog):
            problems.extend(p for i, t in enumerate(self.tasks) for p in _against(catalog, i, t))
        if problems:
            raise Problems(problems)
        return self


def _against(catalog: Catalog, i: int, t: TraceTask) -> list[str]:
    """What of task `i` is not its trace id's catalog task: the id itself, or its
    instruction, scene or urgency (a custom TUF is kept, but not the other urgency's)."""
    if t.trace_id not in catalog:
        known = ", ".join(map(str, catalog.ids()))
        return [
            f"{_at('tasks', i, 'trace_id', t.task_id)}: unknown trace id {t.trace_id}; "
            f"known ids: {known}"
        ]
    spec = catalog[t.trace_id]
    out = [
        f"{_at('tasks', i, field, t.task_id)}: not the {field} of trace {t.trace_id} "
        f"({spec.title or spec.task_class})"
        for field, value, want in (
            ("instruction", t.instruction, spec.instruction),
            ("scene", t.scene, spec.scene),
        )
        if value != want
    ]
    other: UrgencyPreset = "normal" if t.urgency == "urgent" else "urgent"
    if t.urgency != spec.urgency:
        out.append(
            f"{_at('tasks', i, 'urgency', t.task_id)}: trace {t.trace_id} is {spec.urgency}, "
            f"not {t.urgency}"
        )
    elif t.tuf == Tuf.preset(other):
        out.append(
            f"{_at('tasks', i, 'tuf', t.task_id)}: the {other} preset on {a_or_an(t.urgency)} task"
        )
    return out


def _at(items: str, index: int, field: str, ident: str) -> str:
    """Where a problem is, as `problems.where` writes it: `tasks.3.arrival_s (t00003)`."""
    return f"{items}.{index}.{field} ({ident})"


def one_line(err: ValidationError) -> str:
    """The first validation problem as `field.path: message (+N more)`, where one
    line must do (a file the user did not write; `problems.listing` lists them all)."""
    lines = validation_problems(err)
    more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
    return f"{lines[0]}{more}"


def dumps(trace: TraceFile) -> bytes:
    doc = trace.model_dump(mode="json")
    for agent in doc["agents"]:
        if not agent["variant"]:
            del agent["variant"]
    return msgpack.packb(doc, use_bin_type=True)


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
        return TraceFile.model_validate(doc, context={"catalog": load_catalog()})
    except ValidationError as err:
        problems = listing(validation_problems(err, doc))
        raise LrtraceError(f"{source}: invalid trace: {problems}") from None


def _is_trace(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("format") == TRACE_FORMAT


def read(path: Path) -> TraceFile:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise LrtraceError(f"cannot read trace {path}: {err.strerror}") from None
    return loads(data, str(path))
