"""Huge values are refused with their documented bound before they cost memory or
time: a network latency that leaves every task unfinished, a KV pool built in
memory, a workload of billions of tasks, a range flag of a trillion values."""

from __future__ import annotations

from pathlib import Path

import pytest

from lrtrace.capacity import CapacityPlanner
from lrtrace.cli import main
from lrtrace.replay import runner
from lrtrace.workload import MAX_EXPECTED_TASKS, WorkloadSpec


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lrtrace: error: ") and match in err, err


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the work started")

    monkeypatch.setattr(runner, "replay", refuse)
    monkeypatch.setattr(CapacityPlanner, "run", refuse)


def test_network_latency_is_at_most_a_minute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_work: None
) -> None:
    trace, out = tmp_path / "t.lrt", str(tmp_path / "r.json")
    assert main(["compose", "--wid", "1", "--duration", "10", "-o", str(trace)]) == 0
    for value in ("1e12", "1e300", "60001"):
        argv = ["replay", str(trace), "--network-latency-ms", value, "-o", out]
        refused(capsys, argv, f"--network-latency-ms {float(value):g}: at most 60,000")
        argv = ["capacity", "--network-latency-ms", value, "-o", out]
        refused(capsys, argv, "at most 60,000")


def test_kv_tokens_are_bounded_before_a_pool_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_work: None
) -> None:
    argv = ["capacity", "--kv-tokens", "1000000000000", "-o", str(tmp_path / "c.json")]
    refused(capsys, argv, "--kv-tokens values must be between 1 and 10,000,000")


def test_a_range_flag_is_bounded_before_its_list_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_work: None
) -> None:
    argv = ["capacity", "--kv-tokens", "1-1000000000000", "-o", str(tmp_path / "c.json")]
    refused(capsys, argv, "range '1-1000000000000' has more than 100,000 values")


def test_a_workload_is_bounded_by_its_expected_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compose", "--wid", "1", "--eps", "1000", "--duration", "604800"]
    refused(capsys, [*argv, "-o", str(tmp_path / "t.lrt")], "about 2,721,600,000 tasks expected")
    assert not (tmp_path / "t.lrt").exists()

    def spec(duration_s: float) -> WorkloadSpec:  # one task per second
        return WorkloadSpec(eps=1.0, max_tpe=1, trace_ids=(1,), agents=1, duration_s=duration_s)

    assert spec(MAX_EXPECTED_TASKS).expected_tasks() == 500_000
    with pytest.raises(ValueError, match="at most 500,000"):
        spec(MAX_EXPECTED_TASKS + 1)
