"""The paper's figures from a results file (matplotlib, Agg backend, PNG).

- fig5: utility / response / waiting per task type (trace id) and run (Fig. 5)
- fig6: timeline of generation, dispatch and execution of a few tasks (Fig. 6); a run
  without a completed task is noted in its panel
- fig7: mean utility vs max batch size per policy (Fig. 7; needs a batch sweep)
- fig8: mean utility per task class and policy (Fig. 8)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from lrtrace.errors import LrtraceError
from lrtrace.metrics import run_stats
from lrtrace.results_format import ResultsFile, RunRecord, TaskRecord

SIM_STAMP = "SIMULATION (virtual time, latency profile)"
NO_COMPLETED_TASK = "no completed task"


def _title(results: ResultsFile, what: str) -> str:
    sim = f" — {SIM_STAMP}" if results.simulated else ""
    return f"{results.workload.name}: {what}{sim}"


def fig5(results: ResultsFile, path: Path) -> Path:
    metrics = (
        ("utility", "time utility"),
        ("response_s", "response (s)"),
        ("waiting_s", "waiting (s)"),
    )
    runs = [r for r in results.runs if r.max_batch is None] or results.runs
    traces = sorted({t.trace_id for r in runs for t in r.tasks})
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    width = 0.8 / max(1, len(runs))
    for ax, (attr, label) in zip(axes, metrics, strict=True):
        for k, run in enumerate(runs):
            stats = {g.group: g for g in run_stats(run)}
            ys = [
                getattr(stats[f"trace {i}"], attr).mean if f"trace {i}" in stats else np.nan
                for i in traces
            ]
            ax.bar(np.arange(len(traces)) + k * width, ys, width, label=run.shown_label)
        ax.set_xticks(
            np.arange(len(traces)) + width * (len(runs) - 1) / 2, [str(i) for i in traces]
        )
        ax.set_xlabel("task type (trace id)")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    fig.suptitle(_title(results, "per task type (cf. paper Fig. 5)"))
    return _save(fig, path)


def _completed(run: RunRecord) -> list[TaskRecord]:
    """The tasks of `run` with a timeline to draw: finished, with segments."""
    return [t for t in run.tasks if t.finished and t.segments]


def _pick_tasks(run: RunRecord, count: int) -> list[TaskRecord]:
    """An event with an urgent and a normal task (the paper shows tasks 71 and 72)."""
    done = _completed(run)
    for idx, t in enumerate(done):
        if t.urgency == "urgent":
            start = max(0, idx - count // 2)
            return done[start : start + count]
    return done[:count]


def _timeline_runs(results: ResultsFile) -> list[RunRecord]:
    return [r for r in results.runs if r.max_batch is None] or results.runs


def runs_without_completed_tasks(results: ResultsFile) -> list[str]:
    """Labels of the runs Fig. 6 shows that have no completed task, so nothing of
    theirs to draw (an interrupted or failed run): the figure says so in their panel,
    and `lrtrace report` in a line."""
    return [r.label for r in _timeline_runs(results) if not _completed(r)]


def _draw_task(ax: plt.Axes, row: int, t: TaskRecord) -> None:
    robot_free = t.arrival_s  # the robot waits for the planner from here
    for s in t.segments:
        if s.exec_start_s > robot_free:  # the robot is idle, waiting for this segment
            planned = min(max(s.emitted_s, robot_free), s.exec_start_s)
            ax.barh(row, planned - robot_free, left=robot_free, color="tab:orange", height=0.5)
            ax.barh(row, s.exec_start_s - planned, left=planned, color="tab:gray", height=0.5)
        ax.barh(
            row, s.exec_end_s - s.exec_start_s, left=s.exec_start_s, color="tab:green", height=0.5
        )
        ax.plot([s.emitted_s], [row + 0.33], marker="v", color="black", ms=3, ls="")
        robot_free = max(robot_free, s.exec_end_s)
    ax.axvline(t.arrival_s + t.tuf.expected_response_time_s, color="tab:red", lw=0.6, ls=":")


def timeline_figure(results: ResultsFile, count: int = 4) -> plt.Figure:
    """Fig. 6: the same few tasks in every run, picked from the first run that
    completed any (a run whose picked tasks have nothing drawn shows its own); a run
    without a completed task says so in its panel instead of staying blank."""
    runs = _timeline_runs(results)
    fig, axes = plt.subplots(
        len(runs), 1, figsize=(12, 1.2 + 0.55 * count * len(runs)), squeeze=False
    )
    source = next((r for r in runs if _completed(r)), None)
    ids = {t.task_id for t in _pick_tasks(source, count)} if source else set()
    for ax, run in zip(axes[:, 0], runs, strict=True):
        tasks = [t for t in run.tasks if t.task_id in ids]
        if _completed(run) and not any(t.segments for t in tasks):
            tasks = _pick_tasks(run, count)
        for row, t in enumerate(tasks):
            _draw_task(ax, row, t)
        ax.set_yticks(range(len(tasks)), [f"{t.task_id} tr{t.trace_id} {t.urgency}" for t in tasks])
        ax.set_title(run.shown_label, fontsize=9)
        if not _completed(run):
            why = "interrupted" if run.interrupted else f"{len(run.tasks)} tasks, none finished"
            ax.text(
                0.5,
                0.5,
                f"{NO_COMPLETED_TASK} in run {run.label} ({why})",
                transform=ax.transAxes,
                ha="center",
                va="center",
                color="tab:red",
            )
    axes[-1, 0].set_xlabel(
        "time (s): orange = robot waits for planning, gray = network, green = execution, "
        "triangle = segment generated, red line = ERT"
    )
    fig.suptitle(_title(results, "timeline of a few tasks (cf. paper Fig. 6)"))
    return fig


def fig6(results: ResultsFile, path: Path, count: int = 4) -> Path:
    return _save(timeline_figure(results, count), path)


def fig7(results: ResultsFile, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    sweep = [r for r in results.runs if r.max_batch is not None]
    for policy in sorted({r.policy for r in sweep}):
        runs = sorted((r for r in sweep if r.policy == policy), key=lambda r: r.max_batch or 0)
        xs = [r.max_batch or 0 for r in runs]
        ys = [next(g for g in run_stats(r) if g.group == "all").utility.mean for r in runs]
        cut = [str(r.max_batch) for r in runs if r.interrupted]
        label = f"{policy}, max batch {', '.join(cut)} (interrupted)" if cut else policy
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_xlabel("max batch size")
    ax.set_ylabel("mean time utility")
    ax.legend()
    ax.set_title(_title(results, "utility vs batch size (cf. Fig. 7)"), fontsize=9)
    return _save(fig, path)


def fig8(results: ResultsFile, path: Path) -> Path:
    runs = [r for r in results.runs if r.max_batch is None] or results.runs
    classes = sorted({f"{t.urgency}-{t.robot_type}" for r in runs for t in r.tasks})
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(1, len(runs))
    for k, run in enumerate(runs):
        stats = {g.group: g for g in run_stats(run)}
        ys = [stats[c].utility.mean if c in stats else np.nan for c in classes]
        ax.bar(np.arange(len(classes)) + k * width, ys, width, label=run.shown_label)
    ax.set_xticks(np.arange(len(classes)) + width * (len(runs) - 1) / 2, classes)
    ax.set_ylabel("mean time utility")
    ax.legend(fontsize=8)
    ax.set_title(_title(results, "policy comparison (cf. Fig. 8)"), fontsize=9)
    return _save(fig, path)


_FIGURES: dict[str, Callable[[ResultsFile, Path], Path]] = {
    "fig5": fig5,
    "fig6": fig6,
    "fig8": fig8,
    "fig7": fig7,  # a batch sweep's only
}


def figure_paths(results: ResultsFile, out_dir: Path, prefix: str = "lrtrace") -> list[Path]:
    """The files `all_figures` writes for `results`, known before drawing any (the
    CLI checks them against its other files first)."""
    if not results.runs:
        return []
    sweep = any(r.max_batch is not None for r in results.runs)
    return [out_dir / f"{prefix}_{name}.png" for name in _FIGURES if name != "fig7" or sweep]


def all_figures(results: ResultsFile, out_dir: Path, prefix: str = "lrtrace") -> list[Path]:
    """The figures, written into `out_dir` (created if missing); none for a results
    file without runs, which has nothing to draw."""
    paths = figure_paths(results, out_dir, prefix)
    if not paths:
        return []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise LrtraceError(f"cannot write figures to {out_dir}: {err.strerror}") from None
    return [_FIGURES[path.stem.rsplit("_", 1)[1]](results, path) for path in paths]


def _save(fig: plt.Figure, path: Path) -> Path:
    try:
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    except OSError as err:
        raise LrtraceError(f"cannot write figure {path}: {err.strerror}") from None
    finally:
        plt.close(fig)
    return path
