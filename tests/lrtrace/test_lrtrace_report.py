"""`lrtrace report`: what it says about how each run was set up, and a results file
with nothing to draw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from lrtrace import results_format
from lrtrace.cli import main
from lrtrace.errors import LrtraceError
from lrtrace.report import kv_settings, print_report, stats_json
from lrtrace.results_format import ResultsFile, RunRecord
from lrtrace.workload import preset
from timely_core.engine.protocol import HandlingStrategy


def results(*runs: tuple[str, str | None, bool | None]) -> ResultsFile:
    return ResultsFile(
        workload=preset(1),
        runs=[
            RunRecord(
                label=label,
                policy=label,
                target="sim",
                engine="simulated:p",
                simulated=True,
                handling_strategy=None if strategy is None else HandlingStrategy(strategy),
                kv_prefetch=prefetch,
            )
            for label, strategy, prefetch in runs
        ],
    )


def printed(res: ResultsFile) -> str:
    console = Console(record=True, width=200)
    print_report(res, console)
    return console.export_text()


def test_kv_settings_are_shown_where_they_are_not_the_defaults_or_differ() -> None:
    differ = results(("timely", "ttl", False), ("vllm-like", "discard", False))
    line = "KV handling: timely ttl, prefetch off; vllm-like discard, prefetch off"
    assert kv_settings(differ) == line and line in printed(differ)
    assert kv_settings(results(("timely", "swap", True))) == "KV handling: timely swap, prefetch on"
    defaults = results(("timely", "auto", True), ("fcfs", "auto", True))
    assert kv_settings(defaults) is None and "KV handling" not in printed(defaults)
    runs = stats_json(differ)["runs"]
    assert [(r["handling_strategy"], r["kv_prefetch"]) for r in runs] == [
        ("ttl", False),
        ("discard", False),
    ]


def test_results_written_before_kv_settings_were_recorded_still_read(tmp_path: Path) -> None:
    doc = json.loads(results(("timely", None, None)).model_dump_json())
    for run in doc["runs"]:
        del run["handling_strategy"], run["kv_prefetch"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    old = results_format.read(path)
    assert old.runs[0].handling_strategy is None and old.runs[0].kv_prefetch is None
    assert kv_settings(old) is None


def test_a_file_without_runs_draws_no_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "none.json"
    results_format.write(ResultsFile(workload=preset(1)), path)
    figs, stats = tmp_path / "figs", tmp_path / "s.json"
    assert main(["report", str(path), "--plots", str(figs), "--json", str(stats)]) == 0
    assert f"no figures: {path} has no runs" in capsys.readouterr().out
    assert not figs.exists()
    assert json.loads(stats.read_text())["runs"] == []


def test_a_results_file_with_a_time_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    """A NaN start would score full utility (min(beta, nan) is beta): refused at read,
    naming where."""
    from lrtrace.results_format import SegmentRecord, TaskRecord
    from timely_core.scheduling.tuf import Tuf

    res = results(("timely", None, None))
    segment = SegmentRecord(
        index=0, text="mf(1);", statements=1, emitted_s=1.0, dispatched_s=1.01,
        exec_start_s=1.01, exec_end_s=2.0,
    )  # fmt: skip
    task = TaskRecord(
        task_id="t0", trace_id=1, agent_id="drone1", robot_type="drone", urgency="normal",
        tuf=Tuf.normal(), arrival_s=0.5, segments=[segment], success=True, finished=True,
    )  # fmt: skip
    res.runs[0].tasks.append(task)
    doc = json.loads(res.model_dump_json())
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(doc))
    assert results_format.read(path).runs[0].tasks[0].segments[0].exec_start_s == 1.01
    doc["runs"][0]["tasks"][0]["segments"][0]["exec_start_s"] = float("nan")
    path.write_text(json.dumps(doc))  # written as NaN, which JSON readers take
    with pytest.raises(LrtraceError, match=r"invalid results: .*exec_start_s"):
        results_format.read(path)


def test_failed_tasks_are_reported_with_their_reasons() -> None:
    from lrtrace.results_format import TaskRecord
    from timely_core.scheduling.tuf import Tuf

    res = results(("timely", None, None), ("fcfs", None, None))

    def task(n: int, error: str) -> TaskRecord:
        return TaskRecord(
            task_id=f"t{n}", trace_id=1, agent_id="arm1", robot_type="arm", urgency="normal",
            tuf=Tuf.normal(), arrival_s=float(n), success=not error, finished=True, error=error,
        )  # fmt: skip

    bad = "invalid plan text: skill 'sw': unknown skill\n    for a arm"  # one line, said once
    res.runs[0].tasks += [task(0, bad), task(1, bad), task(2, "queue full"), task(3, "")]
    res.runs[1].tasks += [task(0, "")]
    text = printed(res)
    assert (
        "timely: 3 tasks failed: 2 x invalid plan text: skill 'sw': unknown skill for a arm; "
        "1 x queue full" in text
    )
    assert "fcfs:" not in text  # nothing failed there
