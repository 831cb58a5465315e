"""Small mistakes get a line that says what is wrong with them, not what a parser
or the file system made of them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lrtrace import results_format
from lrtrace.cli import main
from lrtrace.replay import runner
from lrtrace.results_format import ResultsFile, RunRecord
from lrtrace.workload import preset
from tests.lrtrace.record_support import task_record

WORKLOAD = "eps: 1\nmax_tpe: 1\ntrace_ids: [1]\nagents: 1\nduration_s: 5\n"


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("lrtrace: error: "), err
    assert match in err, err


@pytest.fixture
def trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A trace to replay; the replay itself must not start."""
    path = tmp_path / "t.lrt"
    assert main(["compose", "--wid", "1", "--duration", "10", "-o", str(path)]) == 0

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the replay started")

    monkeypatch.setattr(runner, "replay", refuse)
    return path


def test_flag_values(trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "r.json")
    argv = ["compose", "--wid", "1", "--trace-ids", "3-1", "-o", out]
    refused(capsys, argv, "reversed range '3-1' in '3-1': write 1-3")
    argv = ["replay", str(trace), "--max-batch", "-2", "-o", out]
    refused(capsys, argv, "--max-batch values must be >= 1, got -2")
    refused(capsys, ["replay", str(trace), "--profile", str(tmp_path), "-o", out], "a directory")
    argv = ["replay", str(trace), "--policy", "lamps", "--handling-strategy", "ttl", "-o", out]
    refused(capsys, argv, "--handling-strategy has no effect with --policy lamps")
    argv = ["compose", "--eps", "0.5", "--max-tpe", "2", "--trace-ids", "1", "--agents", "1"]
    refused(capsys, [*argv, "--duration", "5", "-o", out], "there is only 1 agent per robot")


def test_an_output_ending_in_a_separator_names_a_directory(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newdir = tmp_path / "newdir"
    argv = ["replay", str(trace), "-o", f"{newdir}/"]
    refused(capsys, argv, f"cannot write to {newdir}/: it names a directory")
    assert not newdir.exists()


@pytest.mark.parametrize(
    ("line", "field"), [("agents: true", "agents"), ("eps: true", "eps"), ("seed: false", "seed")]
)
def test_a_workload_yaml_takes_no_booleans_for_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, field: str
) -> None:
    name = line.split(":")[0]
    yaml = tmp_path / "w.yaml"
    yaml.write_text("".join(x for x in WORKLOAD.splitlines(True) if not x.startswith(name)) + line)
    refused(capsys, ["compose", "--yaml", str(yaml), "-o", str(tmp_path / "t.lrt")], f"{field}: ")
    yaml.write_text(WORKLOAD.replace("trace_ids: [1]", "trace_ids: 3-1"))
    refused(capsys, ["compose", "--yaml", str(yaml), "-o", str(tmp_path / "t.lrt")], "reversed")


def run(label: str, end: float = 4.0) -> RunRecord:
    task = task_record("t0", exec_end_s=end)
    return RunRecord(
        label=label,
        policy="timely",
        target="sim",
        engine="simulated:x",
        simulated=True,
        engine_busy_s=1.0,
        tasks=[task],
    )


def busy(doc: dict[str, Any]) -> None:
    doc["runs"][0]["engine_busy_s"] = -3.0


def backwards(doc: dict[str, Any]) -> None:
    doc["runs"][0]["tasks"][0]["segments"][0]["exec_end_s"] = 0.5


def twice(doc: dict[str, Any]) -> None:
    doc["runs"].append(doc["runs"][0])


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (busy, "runs.0.engine_busy_s: Input should be greater than or equal to 0"),
        (backwards, "the execution ends before it starts (0.5 s < 1.008 s)"),
        (twice, "runs.1.label: run label 'timely' appears twice"),
    ],
)
def test_report_refuses_results_it_cannot_report(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any]], None],
    named: str,
) -> None:
    doc = json.loads(ResultsFile(workload=preset(1), runs=[run("timely")]).model_dump_json())
    edit(doc)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    refused(capsys, ["report", str(path)], named)


def test_what_the_loader_refuses_a_replay_may_build(tmp_path: Path) -> None:
    """A live replay records what its robots report, and `record` still takes a
    hand-merged file whose runs share a label: the checks are the loader's."""
    ResultsFile(workload=preset(1), runs=[run("timely", end=0.5)])
    doc = ResultsFile(workload=preset(1), runs=[run("timely"), run("timely")])
    path = tmp_path / "r.json"
    path.write_text(doc.model_dump_json())
    assert len(results_format.read(path).runs) == 2
