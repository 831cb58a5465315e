"""A file given to the wrong command is named for what it is (`report s.lrt`: a
trace), not for the decoder error its bytes raise, and no command suggests another
that would refuse the same file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lrtrace.cli import main
from lrtrace.file_kinds import FORMATS, STATISTICS, what_is


def refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("lrtrace: error: "), err
    return err


@pytest.fixture
def files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Path]:
    """A trace, its results and their statistics, as the CLI writes them."""
    trace, results, stats = tmp_path / "s.lrt", tmp_path / "r.json", tmp_path / "stats.json"
    argv = ["compose", "--eps", "0.2", "--max-tpe", "1", "--trace-ids", "1", "--agents", "1"]
    assert main([*argv, "--duration", "10", "-o", str(trace)]) == 0
    assert main(["replay", str(trace), "-o", str(results)]) == 0
    assert main(["report", str(results), "--json", str(stats)]) == 0
    capsys.readouterr()
    return {"trace": trace, "results": results, "stats": stats}


def test_what_is_tells_lrtraces_files(files: dict[str, Path]) -> None:
    assert what_is(files["trace"].read_bytes()) == FORMATS["lrtrace-trace"]
    assert what_is(files["results"].read_bytes()) == FORMATS["lrtrace-results"]
    assert what_is(files["stats"].read_bytes()) == STATISTICS
    assert what_is(b'{"robot_type": "drone"}') is None
    assert what_is(b"\x93\x01\x02") is None and what_is(b"hello") is None


def test_report_of_a_trace_says_it_is_a_trace(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, ["report", str(files["trace"])])
    assert "not an lrtrace results file: it looks like an lrtrace trace" in err, err
    assert "utf-8" not in err


def test_record_of_one_json_document_says_it_is_not_json_lines(
    tmp_path: Path, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, ["record", str(files["stats"]), "-o", str(tmp_path / "z.lrx")])
    assert "a single JSON document (statistics written by `lrtrace report --json`)" in err
    assert "not JSON lines" in err and "not a JSON object" not in err
    array = tmp_path / "a.json"
    array.write_text(json.dumps([{"robot_type": "drone"}]))
    err = refused(capsys, ["record", str(array), "-o", str(tmp_path / "z.lrx")])
    assert "a single JSON document, not JSON lines" in err


def test_fit_of_capacity_results_says_what_they_are(
    tmp_path: Path, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cap = tmp_path / "cap.json"
    cap.write_text(json.dumps({"format": "lrtrace-capacity", "version": 1, "settings": []}))
    err = refused(capsys, ["fit", str(cap), "--out-dir", str(tmp_path / "m")])
    assert "it looks like lrtrace capacity results" in err and "lrtrace record" not in err
    err = refused(capsys, ["fit", str(files["trace"]), "--out-dir", str(tmp_path / "m")])
    assert "it looks like an lrtrace trace" in err
    # a results file is what `record` takes: the suggestion stays
    err = refused(capsys, ["fit", str(files["results"]), "--out-dir", str(tmp_path / "m")])
    assert f"`lrtrace record {files['results']} -o FILE.lrx`" in err
