"""`lrtrace report`: the per task type and policy statistics as a rich table and JSON."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lrtrace.metrics import GroupStats, Summary, run_stats
from lrtrace.outputs import write_atomically
from lrtrace.results_format import ResultsFile, RunRecord
from timely_core.errors import one_line

SIMULATION_NOTE = (
    "SIMULATION: virtual-time replay on a latency profile, not a measurement of a real engine"
)


def all_stats(results: ResultsFile) -> list[GroupStats]:
    return [g for run in results.runs for g in run_stats(run)]


def _fmt(x: float, ms: bool = False) -> str:
    if math.isnan(x):
        return "-"
    return f"{x * 1000:.0f}" if ms else f"{x:.2f}"


def _cell(s: Summary, ms: bool = False) -> str:
    return " / ".join(_fmt(x, ms) for x in (s.mean, s.p50, s.p95, s.p99))


def table(results: ResultsFile, groups: str = "all") -> Table:
    """groups: "traces" (per trace id), "classes" (per task class), or "all"."""
    title = f"LRTrace {results.workload.name}: mean / p50 / p95 / p99"
    sims = {r.profile for r in results.runs if r.simulated}
    if sims:
        title += f" — SIMULATION on profile {', '.join(sorted(sims))}"
    t = Table(title=title, caption=SIMULATION_NOTE if sims else None)
    t.add_column("run", no_wrap=True)
    t.add_column("group", no_wrap=True)
    t.add_column("done/n", justify="right", no_wrap=True)
    t.add_column("% max util", justify="right")
    for col in ("time utility", "response ms", "waiting ms", "completion s"):
        t.add_column(col, justify="right", no_wrap=True)
    for run in results.runs:
        for g in run_stats(run):
            is_trace = g.group.startswith("trace")
            if (groups == "traces" and not is_trace) or (groups == "classes" and is_trace):
                continue
            t.add_row(*_row(run, g))
    return t


def _row(run: RunRecord, g: GroupStats) -> tuple[str, ...]:
    """A group's numbers under the run's shown label (an interrupted run marked)."""
    return (
        run.shown_label,
        g.group,
        f"{g.completed}/{g.tasks}",
        "-" if math.isnan(g.utility_of_max) else f"{100 * g.utility_of_max:.1f}",
        _cell(g.utility),
        _cell(g.response_s, ms=True),
        _cell(g.waiting_s, ms=True),
        _cell(g.completion_s),
    )


def busy_share(results: ResultsFile, run: RunRecord) -> float | None:
    """The run's engine busy time as a share of the trace's duration: near 1 the fleet
    is at the engine's capacity; over 1, a backlog drained after the last arrival.
    None when the run does not know it (ros, or files written before it)."""
    if run.engine_busy_s is None:
        return None
    return run.engine_busy_s / results.workload.duration_s


def engine_busy(results: ResultsFile) -> str | None:
    """How busy each run kept its engine (`busy_share`); None when no run knows it."""
    parts = [
        f"{r.shown_label} {r.engine_busy_s:.1f} s ({100 * share:.0f}%)"
        for r in results.runs
        if (share := busy_share(results, r)) is not None
    ]
    if not parts:
        return None
    duration = results.workload.duration_s
    return f"engine busy, share of the trace's {duration:g} s: " + ", ".join(parts)


def batch_caps(results: ResultsFile) -> str | None:
    """The cap on generations per iteration each run used (a sweep's, or the target's
    default, e.g. a profile's); None when no run knows it."""
    parts = [f"{r.shown_label} {r.batch_cap}" for r in results.runs if r.batch_cap is not None]
    return "max batch: " + ", ".join(parts) if parts else None


def kv_settings(results: ResultsFile) -> str | None:
    """Each run's KV handling strategy and prefetch, when the runs differ in them or
    any run is not on the service's defaults (auto, prefetch on); None otherwise, and
    when no run knows them (ros, or files written before they were recorded)."""
    known = [
        (r.shown_label, r.handling_strategy.value, r.kv_prefetch)
        for r in results.runs
        if r.handling_strategy is not None
    ]
    if not known or {(s, p) for _, s, p in known} == {("auto", True)}:
        return None
    prefetch = {True: "on", False: "off", None: "?"}
    return "KV handling: " + "; ".join(
        f"{label} {s}, prefetch {prefetch[p]}" for label, s, p in known
    )


def json_safe(x: Any) -> Any:
    """`x` for strict JSON: NaN (a group with no completed task) and infinities (a
    ratio over a baseline at 0) become null, in nested dicts, lists and tuples."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    return x


def stats_json(results: ResultsFile) -> dict[str, Any]:
    """The report as JSON (`json_safe`: NaN for groups with no completed task -> null)."""
    return json_safe(
        {
            "workload": results.workload.model_dump(mode="json"),
            "simulated": results.simulated,
            "note": SIMULATION_NOTE if results.simulated else "measured on a real engine",
            "runs": [
                {
                    "label": r.label,
                    "policy": r.policy,
                    "target": r.target,
                    "engine": r.engine,
                    "simulated": r.simulated,
                    "profile": r.profile,
                    "max_batch": r.max_batch,
                    "batch_cap": r.batch_cap,
                    "handling_strategy": r.handling_strategy and r.handling_strategy.value,
                    "kv_prefetch": r.kv_prefetch,
                    "interrupted": r.interrupted,
                    "wall_s": r.wall_s,
                    "engine_busy_s": r.engine_busy_s,
                    "engine_busy_share": busy_share(results, r),
                }
                for r in results.runs
            ],
            "stats": [asdict(g) for g in all_stats(results)],
        }
    )


def write_json(results: ResultsFile, path: Path) -> None:
    """Atomically, as every output (a Ctrl-C leaves the previous file)."""
    text = json.dumps(stats_json(results), indent=1) + "\n"
    write_atomically(path, text.encode(), "statistics")


def failures(results: ResultsFile, shown: int = 3) -> list[str]:
    """Per run with failed tasks: how many, and why (each distinct reason once, the
    most frequent first, at most `shown`), so a failure never shows as a bare count."""
    lines = []
    for run in results.runs:
        reasons = Counter(
            one_line(t.error, 200) or "no reason recorded"
            for t in run.tasks
            if t.finished and not t.success
        )
        if not reasons:
            continue
        said = "; ".join(f"{n} x {why}" for why, n in reasons.most_common(shown))
        more = f"; {len(reasons) - shown} other reasons" if len(reasons) > shown else ""
        lines.append(f"{run.shown_label}: {sum(reasons.values())} tasks failed: {said}{more}")
    return lines


def print_report(results: ResultsFile, console: Console, groups: str = "all") -> None:
    console.print(table(results, groups))
    for line in (engine_busy(results), batch_caps(results), kv_settings(results)):
        if line is not None:
            console.print(line)
    for line in failures(results):
        console.print(f"[bold red]{escape(line)}[/]")
    if results.simulated:
        console.print(f"[bold yellow]{SIMULATION_NOTE}[/]")
