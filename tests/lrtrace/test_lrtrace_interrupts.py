"""Ctrl-C ends every command with one line and exit status 130, never a traceback;
`capacity` first writes the fleet sizes judged so far, as `replay` writes its runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lrtrace import results_format
from lrtrace.capacity import CapacityPlanner, Setting, SizePoint
from lrtrace.capacity_search import Boundary
from lrtrace.cli import main

TINY = "{name: tiny, robots: {drone: {events_per_s: 0.5, max_tasks_per_event: 4}}}"


def test_capacity_writes_the_sizes_judged_before_ctrl_c(
    tmp_path: Path,
    tokenizer_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge = CapacityPlanner.evaluate
    calls: list[int] = []

    def interrupted_at_the_third(self: CapacityPlanner, setting: Setting, robots: int) -> SizePoint:
        calls.append(robots)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return judge(self, setting, robots)

    monkeypatch.setattr(CapacityPlanner, "evaluate", interrupted_at_the_third)
    out = tmp_path / "cap.json"
    argv = ["capacity", "--mix", TINY, "--tokenizer", str(tokenizer_path), "-o", str(out)]
    argv += ["--seeds", "1", "--duration", "20", "--min-tasks", "3", "--max-robots", "16"]
    assert main(argv) == 130
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert f"interrupted: wrote the 2 fleet sizes judged so far to {out}" in captured.out
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True
    (setting,) = doc["settings"]
    assert setting["interrupted"] is True and not setting["at_limit"]
    assert [p["robots"] for p in setting["points"]] == sorted(calls[:2])
    assert "interrupted" in captured.out  # the table's capacity cell says so
    assert not out.with_suffix(".png").exists()


def test_a_partial_boundary_is_the_last_pass_below_the_first_fail() -> None:
    from lrtrace.capacity import partial_boundary

    def point(robots: int, met: bool) -> SizePoint:
        return SizePoint(robots, {"drone": robots}, 20.0, met, {}, [])

    points = {4: point(4, True), 8: point(8, True), 16: point(16, False), 12: point(12, True)}
    assert partial_boundary(points) == Boundary(12, 16, {4: True, 8: True, 16: False, 12: True})
    assert partial_boundary({}) == Boundary(0, None, {})


def test_ctrl_c_anywhere_else_is_one_line_and_130(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def ctrl_c(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(results_format, "read", ctrl_c)
    assert main(["report", str(tmp_path / "r.json")]) == 130
    assert capsys.readouterr().err == "lrtrace: interrupted\n"
