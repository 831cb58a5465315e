"""Fig. 6 draws whatever runs have completed tasks, and says which runs have none,
in their panel and in `lrtrace report`'s output, rather than coming out blank."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from lrtrace import results_format
from lrtrace.cli import main
from lrtrace.plots import runs_without_completed_tasks, timeline_figure
from lrtrace.results_format import ResultsFile, RunRecord
from lrtrace.workload import preset
from tests.lrtrace.record_support import task_record


def results(*completed: bool) -> ResultsFile:
    """One run per flag: all of its three tasks completed, or none."""
    runs = [
        RunRecord(
            label=f"run{k}",
            policy="timely",
            target="sim",
            engine="simulated:x",
            simulated=True,
            interrupted=not done,
            tasks=[task_record(f"t{i}", done, "urgent" if i == 1 else "normal") for i in range(3)],
        )
        for k, done in enumerate(completed)
    ]
    return ResultsFile(workload=preset(1), runs=runs)


def panels(res: ResultsFile) -> list[tuple[int, list[str]]]:
    """(bars drawn, texts) of each run's panel."""
    fig = timeline_figure(res)
    try:
        return [(len(ax.patches), [t.get_text() for t in ax.texts]) for ax in fig.axes]
    finally:
        plt.close(fig)


def test_a_first_run_without_completed_tasks_leaves_the_others_drawn() -> None:
    res = results(False, True)
    (empty_bars, empty_texts), (bars, texts) = panels(res)
    assert empty_bars == 0 and empty_texts == ["no completed task in run run0 (interrupted)"]
    assert bars > 0 and texts == []
    assert runs_without_completed_tasks(res) == ["run0"]


def test_every_run_with_data_is_drawn_and_none_noted() -> None:
    res = results(True, True)
    assert all(bars > 0 and texts == [] for bars, texts in panels(res))
    assert runs_without_completed_tasks(res) == []


def test_a_run_that_completed_other_tasks_shows_its_own() -> None:
    res = results(True, True)
    for t in res.runs[1].tasks:
        t.task_id = f"other-{t.task_id}"
    (bars, _), (other_bars, other_texts) = panels(res)
    assert bars > 0 and other_bars > 0 and other_texts == []


def test_no_run_with_data_says_so_in_every_panel() -> None:
    res = results(False, False)
    assert [texts for _, texts in panels(res)] == [
        ["no completed task in run run0 (interrupted)"],
        ["no completed task in run run1 (interrupted)"],
    ]


def test_report_says_which_runs_have_no_completed_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.json"
    results_format.write(results(False, True), path)
    assert main(["report", str(path), "--plots", str(tmp_path / "figs")]) == 0
    out = capsys.readouterr().out
    assert "fig6: run run0 has no completed task (its panel says so)" in out, out
    assert "fig6: run run1" not in out
    assert (tmp_path / "figs" / "r_fig6.png").is_file()
