"""An output that is one of the command's inputs, or another of its outputs, is
refused before any work: writing it would destroy what the command reads or what it
wrote first. Files are compared as files (links and spellings included)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lrtrace import engine_profile_cli
from lrtrace.cli import main
from lrtrace.errors import LrtraceError
from lrtrace.outputs import check_distinct, same_file

TINY = "{name: tiny, robots: {drone: {events_per_s: 0.5, max_tasks_per_event: 4}}}"
REPORT = '{"robot_type": "drone", "skill": "mf", "args": [100], "duration_s": 3}\n'


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("lrtrace: error: "), err
    assert match in err, err


def untouched(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before, f"{path} was overwritten"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "s.lrt"
    argv = ["compose", "--eps", "0.2", "--max-tpe", "2", "--trace-ids", "1-3,9"]
    assert main([*argv, "--agents", "3", "--duration", "20", "-o", str(path)]) == 0
    return path


def test_same_file_sees_links_and_spellings(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text("{}")
    os.link(a, tmp_path / "hard.json")
    (tmp_path / "soft.json").symlink_to(a)
    for other in ("hard.json", "soft.json", "./a.json", "sub/../a.json"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        assert same_file(tmp_path / other, a), other
    assert same_file(tmp_path / "new.json", tmp_path / "sub" / ".." / "new.json")
    assert not same_file(tmp_path / "new.json", a)


def test_check_distinct_names_both_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    check_distinct([("-o", a), ("--plot", b), ("--json", None)], [("the trace", None)])
    with pytest.raises(LrtraceError, match=r"^-o .*/a is the trace this command reads"):
        check_distinct([("-o", a)], [("the trace", a)])
    with pytest.raises(LrtraceError, match=r"^--plot .*/a is the same file as -o .*/a"):
        check_distinct([("-o", a), ("--plot", a)])


def test_replay_onto_its_trace(
    trace: Path, capsys: pytest.CaptureFixture[str], no_replay: None
) -> None:
    before = trace.read_bytes()
    refused(capsys, ["replay", str(trace), "-o", str(trace)], "is the trace this command reads")
    link = trace.with_name("link.lrt")
    link.symlink_to(trace)
    refused(capsys, ["replay", str(link), "-o", str(trace)], "is the trace this command reads")
    untouched(trace, before)


def test_replay_onto_its_profile_or_tokenizer(
    tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str], no_replay: None
) -> None:
    profile = tmp_path / "p.json"
    profile.write_text("{}")
    argv = ["replay", str(trace), "--profile", str(profile), "-o", str(profile)]
    refused(capsys, argv, "is the latency profile this command reads")
    argv = ["replay", str(trace), "--tokenizer", str(profile), "-o", str(profile)]
    refused(capsys, argv, "is the tokenizer this command reads")


def test_report_onto_its_results(
    tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "r.json"
    assert main(["replay", str(trace), "-o", str(results)]) == 0
    before = results.read_bytes()
    capsys.readouterr()
    refused(capsys, ["report", str(results), "--json", str(results)], "is the results file")
    # a figure named like the statistics: one would replace the other
    stats = tmp_path / "figs" / "r_fig5.png"
    (tmp_path / "figs").mkdir()
    argv = ["report", str(results), "--json", str(stats), "--plots", str(tmp_path / "figs")]
    refused(capsys, argv, "the figure")
    untouched(results, before)
    assert not stats.exists()


def test_compose_onto_its_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    yaml = tmp_path / "w.yaml"
    yaml.write_text("eps: 1\nmax_tpe: 1\ntrace_ids: [1]\nagents: 1\nduration_s: 5\n")
    before = yaml.read_bytes()
    refused(capsys, ["compose", "--yaml", str(yaml), "-o", str(yaml)], "is the workload YAML")
    untouched(yaml, before)


def test_capacity_json_and_figure_on_one_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "cap.png"
    base = ["capacity", "--mix", TINY]
    refused(capsys, [*base, "-o", str(png)], f"is the same file as -o {png}")
    json_ = tmp_path / "cap.json"
    refused(capsys, [*base, "-o", str(json_), "--plot", str(json_)], "is the same file as -o")
    mix = tmp_path / "mix.yaml"
    mix.write_text(TINY)
    refused(capsys, ["capacity", "--mix", str(mix), "-o", str(mix)], "is the fleet mix")
    assert not png.exists() and not json_.exists() and mix.read_text() == TINY


def test_record_and_fit_onto_their_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = tmp_path / "x.jsonl"
    reports.write_text(REPORT)
    refused(capsys, ["record", str(reports), "-o", str(reports)], "is the reports file")
    assert reports.read_text() == REPORT
    executions = tmp_path / "drone.yaml"  # named as fit names its drone model
    assert main(["record", str(reports), "-o", str(executions)]) == 0
    before = executions.read_bytes()
    argv = ["fit", str(executions), "--out-dir", str(tmp_path)]
    refused(capsys, argv, "the drone model")
    untouched(executions, before)


def test_profile_engine_onto_its_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured")

    monkeypatch.setattr(engine_profile_cli, "measure", refuse)
    config = tmp_path / "config.json"  # the check comes before the checkpoint is read
    config.write_text("{}")
    argv = ["profile-engine", "--model", str(tmp_path), "--out", str(config)]
    refused(capsys, argv, "is the checkpoint's config")
    untouched(config, b"{}")
