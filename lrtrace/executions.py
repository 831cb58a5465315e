"""`lrtrace record` and `lrtrace fit`: measured skill executions -> refitted models.

Robot executors report each executed skill call with its measured duration as a JSON
line, e.g. `{"robot_type": "drone", "skill": "mf", "args": [100], "duration_s": 2.9,
"robot_id": "drone1"}`. `record` validates these against the robot type's skill set
and appends them to a versioned msgpack executions file; `fit` refits the
execution-time models (`ExecTimeModel.refit`) from one or more such files and writes
the refitted skill-set files, which the simulator and the scheduler then use.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Literal

import msgpack
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lrtrace.errors import LrtraceError
from lrtrace.trace_format import one_line

EXECUTIONS_FORMAT: Final = "lrtrace-executions"
EXECUTIONS_VERSION: Final = 1

SkillArg = bool | int | float | str | None


class Execution(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    robot_type: str = Field(min_length=1, max_length=32)
    skill: str = Field(min_length=1, max_length=64)
    args: tuple[SkillArg, ...] = ()
    duration_s: float = Field(ge=0, le=24 * 3600, allow_inf_nan=False)
    robot_id: str = ""
    started_at_s: float | None = None


class ExecutionsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["lrtrace-executions"] = EXECUTIONS_FORMAT
    version: Literal[1] = EXECUTIONS_VERSION
    executions: list[Execution] = Field(default_factory=list)


def _check_skill(e: Execution, where: str) -> None:
    from robot_models.skills import SkillSet

    try:
        SkillSet.load(e.robot_type).validate_call(e.skill, list(e.args))
    except ValueError as err:  # unknown robot type, unknown skill, bad argument
        raise LrtraceError(f"{where}: {err}") from None


def parse_reports(lines: Iterable[str], source: str) -> list[Execution]:
    out: list[Execution] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{n}"
        try:
            e = Execution.model_validate(json.loads(line))
        except json.JSONDecodeError as err:
            raise LrtraceError(f"{where}: not a JSON object ({err.msg})") from None
        except ValidationError as err:
            raise LrtraceError(f"{where}: invalid execution report: {one_line(err)}") from None
        _check_skill(e, where)
        out.append(e)
    return out


def read(path: Path) -> ExecutionsFile:
    try:
        doc = msgpack.unpackb(path.read_bytes(), raw=False)
    except OSError as err:
        raise LrtraceError(f"cannot read executions {path}: {err.strerror}") from None
    except (ValueError, TypeError) as err:
        raise LrtraceError(f"{path}: truncated or malformed executions file ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != EXECUTIONS_FORMAT:
        raise LrtraceError(f"{path}: not an lrtrace executions file")
    try:
        return ExecutionsFile.model_validate(doc)
    except ValidationError as err:
        raise LrtraceError(f"{path}: invalid executions file: {one_line(err)}") from None


def write(doc: ExecutionsFile, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(msgpack.packb(doc.model_dump(mode="json"), use_bin_type=True))
    tmp.replace(path)


def record_reports(reports: Path, out: Path) -> int:
    """Append the reports (a JSON-lines file, or stdin for '-') to `out`."""
    if str(reports) == "-":
        new = parse_reports(sys.stdin, "stdin")
    else:
        try:
            text = reports.read_text(encoding="utf-8")
        except OSError as err:
            raise LrtraceError(f"cannot read reports {reports}: {err.strerror}") from None
        new = parse_reports(text.splitlines(), str(reports))
    doc = read(out) if out.exists() else ExecutionsFile()
    doc.executions.extend(new)
    write(doc, out)
    return len(new)


def fit_models(paths: list[Path], out_dir: Path) -> list[str]:
    """Refit each robot type's models from the executions; one summary line per skill."""
    from robot_models.exec_time import ExecTimeModel, ExecutionRecord
    from robot_models.plan_ast import BoundCall

    by_type: dict[str, list[Execution]] = defaultdict(list)
    for path in paths:
        for e in read(path).executions:
            by_type[e.robot_type].append(e)
    if not by_type:
        raise LrtraceError("no executions to fit")
    out_dir.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    for robot_type, executions in sorted(by_type.items()):
        model = ExecTimeModel.for_robot(robot_type)
        records = []
        for e in executions:
            skill = model.skill_set.get(e.skill)
            records.append(
                ExecutionRecord(BoundCall(skill.name, skill.short, tuple(e.args)), e.duration_s)
            )
        before = {r.call.name: model.estimate(r.call) for r in records}
        used = model.refit(records)
        path = out_dir / f"{robot_type}.yaml"
        model.save(path)
        for name, count in sorted(used.items()):
            call = next(r.call for r in records if r.call.name == name)
            old, new = before[name], model.estimate(call)
            lines.append(
                f"{robot_type}.{name}: {count} executions; (min, mean) for {call}: "
                f"({old[0]:.2f}, {old[1]:.2f}) s -> ({new[0]:.2f}, {new[1]:.2f}) s"
            )
        lines.append(f"wrote {path}")
    return lines
