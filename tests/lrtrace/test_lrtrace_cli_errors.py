"""User mistakes end in one line `lrtrace: error: ...` and exit status 2, never a
traceback, and are caught before the long work (a replay, a measurement) starts."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from lrtrace import engine_profile_cli, trace_format
from lrtrace.cli import main

NOT_UTF8 = "eps: 1\n# caf\xe9\n".encode("latin-1")


def bad(capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("lrtrace: error: "), err
    assert match in err, err


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.lrt"
    assert main(["compose", "--wid", "1", "--duration", "20", "-o", str(path)]) == 0
    return path


def test_network_latency_must_be_a_finite_number(
    tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str], no_replay: None
) -> None:
    out = str(tmp_path / "r.json")
    for value in ("nan", "inf", "-1"):
        argv = ["replay", str(trace), f"--network-latency-ms={value}", "-o", out]
        bad(capsys, argv, "--network-latency-ms must be a finite number >= 0")
        argv = ["capacity", "-o", out, f"--network-latency-ms={value}"]
        bad(capsys, argv, "--network-latency-ms must be a finite number >= 0")


def test_replay_checks_its_output_before_replaying(
    tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str], no_replay: None
) -> None:
    missing = str(tmp_path / "no" / "r.json")
    bad(capsys, ["replay", str(trace), "-o", missing], f"no directory {tmp_path / 'no'}")
    bad(capsys, ["replay", str(trace), "-o", str(tmp_path)], "it is a directory")
    assert not (tmp_path / "no").exists()


def test_report_and_fit_outputs_that_cannot_be_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "r.json"
    results.write_text(
        '{"format": "lrtrace-results", "version": 1, "runs": [], "workload": {"eps": 1, '
        '"max_tpe": 1, "trace_ids": [1], "agents": 1, "duration_s": 5}}'
    )
    a_file = tmp_path / "file"
    a_file.write_text("")
    bad(capsys, ["report", str(results), "--json", str(tmp_path)], "it is a directory")
    bad(capsys, ["report", str(results), "--json", str(a_file / "s.json")], "no directory")
    bad(capsys, ["report", str(results), "--plots", str(a_file)], "not a directory")
    lrx = tmp_path / "x.lrx"
    reports = tmp_path / "x.jsonl"
    reports.write_text('{"robot_type": "drone", "skill": "mf", "args": [100], "duration_s": 3}\n')
    assert main(["record", str(reports), "-o", str(lrx)]) == 0
    bad(capsys, ["fit", str(lrx), "--out-dir", str(a_file / "models")], "cannot write models")
    bad(capsys, ["record", str(reports), "-o", str(tmp_path / "no" / "x.lrx")], "no directory")


def test_text_that_is_not_utf8(
    tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "w.yaml").write_bytes(NOT_UTF8)
    out = str(tmp_path / "o")
    bad(capsys, ["compose", "--yaml", str(tmp_path / "w.yaml"), "-o", out], "not UTF-8 text")
    bad(capsys, ["record", str(trace), "-o", out], "not UTF-8 text")
    bad(capsys, ["capacity", "--mix", str(tmp_path / "w.yaml"), "-o", out], "not UTF-8 text")


def test_threads_are_checked_before_any_engine_is_built(
    tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str], no_replay: None
) -> None:
    argv = ["replay", str(trace), "--target", "service", "--threads", "0"]
    bad(capsys, [*argv, "-o", str(tmp_path / "r.json")], "--threads 0: Input should be greater")


def test_profile_engine_refuses_bad_flags_before_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured")

    monkeypatch.setattr(engine_profile_cli, "measure", refuse)
    out = ["--out", str(tmp_path / "p.json")]
    bad(capsys, ["profile-engine", "--threads", "0", *out], "--threads 0: Input should be")
    bad(capsys, ["profile-engine", "--name", "My CPU", *out], "--name 'My CPU': a profile name")
    nowhere = tmp_path / "no" / "dir" / "p.json"
    bad(capsys, ["profile-engine", "--out", str(nowhere)], "no directory")
    assert not (tmp_path / "no").exists()


def test_files_of_the_wrong_kind_say_what_they_are_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "r.json")
    (tmp_path / "r.json").write_text('{"format": "lrtrace-results"}')
    argv = ["replay", out, "-o", str(tmp_path / "o.json")]
    bad(capsys, argv, "not an lrtrace trace: it looks like JSON")
    (tmp_path / "notes.lrt").write_text("hello")
    bad(capsys, ["replay", str(tmp_path / "notes.lrt"), "-o", out], "not an lrtrace trace")
    # a trace with bytes after it is still called malformed, not something else
    data = trace_format.dumps(trace_format.read(trace_of(tmp_path))) + msgpack.packb(1)
    (tmp_path / "long.lrt").write_bytes(data)
    bad(capsys, ["replay", str(tmp_path / "long.lrt"), "-o", out], "trailing bytes")
    reports = tmp_path / "x.jsonl"
    reports.write_text('{"robot_type": "drone", "skill": "mf", "args": [100], "duration_s": 3}\n')
    bad(capsys, ["fit", str(reports), "--out-dir", str(tmp_path)], "`lrtrace record")


def trace_of(tmp_path: Path) -> Path:
    path = tmp_path / "one.lrt"
    assert main(["compose", "--wid", "1", "--duration", "10", "-o", str(path)]) == 0
    return path


def test_compose_counts_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compose", "--eps", "0.5", "--max-tpe", "1", "--trace-ids", "6", "--agents", "1"]
    assert main([*argv, "--duration", "2", "--seed", "1", "-o", str(tmp_path / "t.lrt")]) == 0
    out = capsys.readouterr().out
    assert "on 1 agent (seed 1)" in out, out
    assert main([*argv, "--duration", "10", "-o", str(tmp_path / "t.lrt")]) == 0
    assert " tasks in " in capsys.readouterr().out


def test_a_policy_or_batch_cap_given_twice_is_refused(
    tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str], no_replay: None
) -> None:
    out = str(tmp_path / "r.json")
    argv = ["replay", str(trace), "--policy", "timely,fcfs,timely", "-o", out]
    bad(capsys, argv, "run label 'timely' would be used twice")
    argv = ["replay", str(trace), "--max-batch", "2,4,2", "-o", out]
    bad(capsys, argv, "run label 'timely@2' would be used twice")


@pytest.mark.parametrize(
    ("target", "flags", "named"),
    [
        ("sim", ["--threads", "4"], "--threads has no effect with --target sim"),
        ("sim", ["--model", "ckpt"], "--model has no effect with --target sim"),
        ("service", ["--tokenizer", "t.json"], "--tokenizer has no effect with --target service"),
        ("service", ["--profile", "other"], "--profile has no effect with --target service"),
        (
            "ros",
            ["--profile", "paper-llama3-8b-rtx4090"],  # the default's name: given all the same
            "--profile has no effect with --target ros",
        ),
        ("ros", ["--max-batch", "4"], "--max-batch has no effect with --target ros"),
        ("ros", ["--threads", "2"], "--threads has no effect with --target ros"),
    ],
)
def test_a_flag_the_target_ignores_is_refused(
    tmp_path: Path,
    trace: Path,
    capsys: pytest.CaptureFixture[str],
    no_replay: None,
    target: str,
    flags: list[str],
    named: str,
) -> None:
    argv = ["replay", str(trace), "--target", target, *flags, "-o", str(tmp_path / "r.json")]
    bad(capsys, argv, named)
