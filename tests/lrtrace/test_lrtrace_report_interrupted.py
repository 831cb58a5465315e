"""A run cut short by Ctrl-C (`interrupted` in the results) says so wherever `lrtrace
report` shows it, its table, its notes and the figures' legends and panels, so its
partial numbers never pass for a whole run's."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from rich.console import Console

from lrtrace import plots
from lrtrace.plots import all_figures
from lrtrace.report import print_report
from lrtrace.results_format import ResultsFile, RunRecord
from lrtrace.workload import preset
from tests.lrtrace.record_support import task_record


def results(max_batch: int | None = None) -> ResultsFile:
    """`timely` whole, `fcfs` interrupted after one task (both with a task done)."""
    runs = [
        RunRecord(
            label=policy if max_batch is None else f"{policy}@{max_batch}",
            policy=policy,
            target="sim",
            engine="simulated:x",
            simulated=True,
            max_batch=max_batch,
            batch_cap=8,
            engine_busy_s=1.0,
            interrupted=policy == "fcfs",
            tasks=[task_record("t0")],
        )
        for policy in ("timely", "fcfs")
    ]
    return ResultsFile(workload=preset(1), runs=runs)


def test_the_table_and_notes_mark_the_interrupted_run() -> None:
    console = Console(record=True, width=250)
    print_report(results(), console)
    text = console.export_text()
    table_rows = [line for line in text.splitlines() if "fcfs" in line and "/" in line]
    assert table_rows and all("fcfs (interrupted)" in row for row in table_rows), text
    assert "timely (interrupted)" not in text
    assert "fcfs (interrupted) 1.0 s" in text  # engine busy
    assert "fcfs (interrupted) 8" in text  # max batch


def test_the_figures_mark_it_in_legends_and_panels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, list[str]] = {}
    save = plots._save

    def keep_labels(fig: plt.Figure, path: Path) -> Path:
        legends = [ax.get_legend() for ax in fig.axes]
        texts = [t.get_text() for legend in legends if legend for t in legend.get_texts()]
        seen[path.stem] = texts + [ax.get_title() for ax in fig.axes]
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", keep_labels)
    all_figures(results(), tmp_path / "a", prefix="r")
    assert "fcfs (interrupted)" in seen["r_fig5"] and "timely" in seen["r_fig5"]
    assert "fcfs (interrupted)" in seen["r_fig8"]
    assert "fcfs (interrupted)" in seen["r_fig6"]  # the timeline panel's title
    all_figures(results(max_batch=4), tmp_path / "b", prefix="s")
    assert "fcfs, max batch 4 (interrupted)" in seen["s_fig7"] and "timely" in seen["s_fig7"]
