"""`lrtrace record` and `lrtrace fit`: measured skill executions -> refitted models.

Robot executors report each executed skill call with its measured duration as a JSON
line, e.g. `{"robot_type": "drone", "skill": "mf", "args": [100], "duration_s": 2.9,
"robot_id": "drone1"}`. `record` validates these against the robot type's skill set
and appends them to a versioned msgpack executions file; `fit` refits the
execution-time models (`ExecTimeModel.refit`) from one or more such files and writes
the refitted skill-set files, which the simulator and the scheduler then use.

`record` also takes an lrtrace results file (a replay, e.g. through the ROS 2 planner
on real robots): each segment carries its execution start and end, so a segment that
is exactly one skill call with literal arguments becomes one execution. Segments
with several calls or control flow are skipped (their time cannot be split between
the calls), and so is everything after a `->` return (it never ran).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, Literal

import msgpack
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lrtrace import results_format
from lrtrace.errors import LrtraceError
from lrtrace.file_kinds import FORMATS, what_is
from lrtrace.outputs import check_distinct, check_file, write_atomically
from lrtrace.results_format import ResultsFile
from lrtrace.trace_format import one_line

EXECUTIONS_FORMAT: Final = "lrtrace-executions"
EXECUTIONS_VERSION: Final = 1

SkillArg = bool | int | float | str | None
NOT_REPORTS = "neither executor reports (JSON lines) nor an lrtrace results file"


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
    """The executions of `path`, each checked against its robot type's skills as
    `record` checks a report: a file is not trusted for having been recorded (it may
    be hand-edited, or recorded against other skill sets)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise LrtraceError(f"cannot read executions {path}: {err.strerror}") from None
    kind = what_is(data)
    if kind is not None and kind != FORMATS[EXECUTIONS_FORMAT]:
        recordable = kind == FORMATS["lrtrace-results"]
        raise LrtraceError(
            f"{path}: not an lrtrace executions file: it looks like {kind}"
            + (
                f"; collect its executions with `lrtrace record {path} -o FILE.lrx`"
                if recordable
                else ""
            )
        )
    if data.lstrip()[:1] in (b"{", b"["):  # executor reports
        raise LrtraceError(
            f"{path}: not an lrtrace executions file but JSON; collect executions from "
            f"executor reports or a results file with `lrtrace record {path} -o FILE.lrx` "
            "first"
        )
    try:
        doc = msgpack.unpackb(data, raw=False)
    except (ValueError, TypeError) as err:
        raise LrtraceError(f"{path}: truncated or malformed executions file ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != EXECUTIONS_FORMAT:
        raise LrtraceError(f"{path}: not an lrtrace executions file")
    try:
        file = ExecutionsFile.model_validate(doc)
    except ValidationError as err:
        raise LrtraceError(f"{path}: invalid executions file: {one_line(err)}") from None
    for i, e in enumerate(file.executions):
        _check_skill(e, f"{path}: executions.{i}")
    return file


def write(doc: ExecutionsFile, path: Path) -> None:
    data = msgpack.packb(doc.model_dump(mode="json"), use_bin_type=True)
    write_atomically(path, data, "executions")


def executions_from_results(
    results: ResultsFile, source: str, run_label: str | None = None
) -> tuple[list[Execution], int]:
    """(the single-call segments of every finished task as executions, the number of
    executed segments skipped because they are not one skill call). `run_label`: only
    that run (default: every run of the file); a label that several runs share is
    refused rather than merging them."""
    from robot_models.language import load_language
    from robot_models.plan_ast import CallStmt, Return

    runs = [r for r in results.runs if run_label is None or r.label == run_label]
    if not runs:
        labels = ", ".join(r.label for r in results.runs) or "none"
        raise LrtraceError(f"{source}: no run labelled {run_label!r} (runs: {labels})")
    if run_label is not None and len(runs) > 1:  # a hand-merged file: which run is meant?
        raise LrtraceError(
            f"{source}: {len(runs)} runs are labelled {run_label!r}; --run needs a label "
            "that names one run (relabel the others in the file)"
        )
    out: list[Execution] = []
    skipped = 0
    languages: dict[str, Any] = {}
    for run in runs:
        for task in run.tasks:
            if not (task.finished and task.success):
                continue
            if task.robot_type not in languages:
                try:
                    languages[task.robot_type] = load_language(task.robot_type)
                except (KeyError, ValueError) as err:
                    raise LrtraceError(f"{source}: task {task.task_id}: {err}") from None
            language = languages[task.robot_type]
            for seg in task.segments:
                where = f"{source}: task {task.task_id} segment {seg.index}"
                try:
                    nodes = [st.node for st in language.parse(seg.text)]
                except ValueError as err:
                    raise LrtraceError(f"{where}: not a plan segment ({err})") from None
                call = nodes[0].call if len(nodes) == 1 and isinstance(nodes[0], CallStmt) else None
                args = call.literal_args() if call is not None else None
                if call is None or args is None:  # several calls, control flow, variables
                    skipped += 1
                else:
                    e = Execution(
                        robot_type=task.robot_type,
                        skill=call.name,
                        args=tuple(args),
                        duration_s=seg.exec_end_s - seg.exec_start_s,
                        robot_id=task.agent_id,
                        started_at_s=seg.exec_start_s,
                    )
                    _check_skill(e, where)
                    out.append(e)
                if any(isinstance(n, Return) for n in nodes):
                    break  # the plan returned: later segments never ran
    return out, skipped


def _read_results(path: Path) -> ResultsFile | None:
    """The file as an lrtrace results file, or None if it is not one (JSON lines)."""
    try:
        head = path.read_bytes()[:4096].lstrip()
    except OSError as err:
        raise LrtraceError(f"cannot read reports {path}: {err.strerror}") from None
    if not head.startswith(b"{") or b'"lrtrace-results"' not in head:
        return None
    return results_format.read(path)


def _refuse_one_document(text: str, reports: Path) -> None:
    """Refuse a file that is one JSON document over several lines (or an array): it is
    not JSON lines, and line by line it would only be "not a JSON object"."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 and not text.lstrip().startswith("["):
        return  # one line: a report, judged as one
    try:
        json.loads(text)
    except ValueError:
        return
    kind = what_is(text.encode())
    raise LrtraceError(
        f"{reports}: a single JSON document"
        + (f" ({kind})" if kind else "")
        + ", not JSON lines of executor reports (one JSON object per line)"
    )


def record_reports(reports: Path, out: Path, run_label: str | None = None) -> tuple[int, int]:
    """Append the executions of `reports` to `out`: executor reports (a JSON-lines
    file, or stdin for '-') or an lrtrace results file. Returns (executions recorded,
    segments skipped; always 0 for reports)."""
    source = None if str(reports) == "-" else reports
    check_distinct([("-o", out)], [("the reports file", source)])
    check_file(out, "executions")
    skipped = 0
    results = None if str(reports) == "-" else _read_results(reports)
    if results is not None:
        new, skipped = executions_from_results(results, str(reports), run_label)
    elif run_label is not None:
        raise LrtraceError(f"{reports}: --run applies to a results file only")
    elif str(reports) == "-":
        try:
            new = parse_reports(sys.stdin, "stdin")
        except UnicodeDecodeError:
            raise LrtraceError(f"stdin: {NOT_REPORTS} (not UTF-8 text)") from None
    else:
        try:
            text = reports.read_text(encoding="utf-8")
        except OSError as err:
            raise LrtraceError(f"cannot read reports {reports}: {err.strerror}") from None
        except UnicodeDecodeError:
            raise LrtraceError(f"{reports}: {NOT_REPORTS} (not UTF-8 text)") from None
        _refuse_one_document(text, reports)
        new = parse_reports(text.splitlines(), str(reports))
    doc = read(out) if out.exists() else ExecutionsFile()
    doc.executions.extend(new)
    write(doc, out)
    return len(new), skipped


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
    models = [(f"the {t} model", out_dir / f"{t}.yaml") for t in sorted(by_type)]
    check_distinct(models, [("an executions file", p) for p in paths])
    if out_dir.exists() and not out_dir.is_dir():
        raise LrtraceError(f"cannot write models to {out_dir}: not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise LrtraceError(f"cannot write models to {out_dir}: {err.strerror}") from None
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
        try:
            model.save(path)
        except OSError as err:
            raise LrtraceError(f"cannot write model {path}: {err.strerror}") from None
        for name, count in sorted(used.items()):
            call = next(r.call for r in records if r.call.name == name)
            old, new = before[name], model.estimate(call)
            lines.append(
                f"{robot_type}.{name}: {count} executions; (min, mean) for {call}: "
                f"({old[0]:.2f}, {old[1]:.2f}) s -> ({new[0]:.2f}, {new[1]:.2f}) s"
            )
        lines.append(f"wrote {path}")
    return lines
