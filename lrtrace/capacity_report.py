"""`lrtrace capacity` output: the table a reader sizes a fleet with, and the JSON
that keeps every size tried (per seed) behind it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from rich.table import Table

from lrtrace.capacity import CapacityPlanner, SettingResult, SizePoint
from lrtrace.outputs import write_atomically
from lrtrace.report import SIMULATION_NOTE, json_safe

FORMAT = "lrtrace-capacity"


def capacity_text(result: SettingResult) -> str:
    b = result.boundary
    if result.interrupted:  # what the sizes finished say, not a capacity
        if not result.points:
            return "- (interrupted before a size was judged)"
        fails = f"; {b.failed} fails" if b.failed is not None else ""
        return f">= {b.passed} (interrupted{fails})"
    if b.at_limit:
        return f">= {b.passed} (the search limit)"
    if b.passed == 0:
        return f"0 (fails at {b.failed})"
    return f"{b.passed} ({b.failed} fails)"


def _classes(judged: dict[str, float]) -> str:
    return ", ".join(f"{cls} {100 * v:.1f}%" for cls, v in judged.items()) or "-"


def _busy(point: SizePoint | None) -> str:
    if point is None:
        return "-"
    return f"{100 * statistics.median(r.engine_busy_share for r in point.runs):.0f}%"


def table(planner: CapacityPlanner, results: list[SettingResult], tokenizer_source: str) -> Table:
    """One row per setting: capacity, the fleet and load it means, and the evidence
    on both sides of the boundary (judged values: urgent = share at full utility,
    normal = mean utility as a share of the maximum)."""
    search = planner.search
    t = Table(
        title=(
            f"Capacity of one engine for mix {planner.mix.name!r} — SIMULATION on profile "
            f"{planner.profile.name}"
        ),
        caption=(
            f"target: {planner.target.describe()}; {search.seeds} seed(s), rule "
            f"{search.rule!r}; replays of {search.duration_s:g} s (longer for small "
            f"fleets: >= {search.min_tasks} tasks per class); tokenizer: {tokenizer_source}. "
            + SIMULATION_NOTE
        ),
    )
    for col in ("setting", "max batch", "KV tokens", "capacity (robots)", "fleet", "tasks/s"):
        t.add_column(col, justify="left" if col in ("setting", "fleet") else "right")
    t.add_column("at capacity")
    t.add_column("first failing size")
    t.add_column("busy", justify="right")
    t.add_column("sizes tried", justify="right")
    for r in results:
        at = r.points.get(r.capacity)
        fail = r.points.get(r.boundary.failed) if r.boundary.failed else None
        mib = r.kv_tokens * planner.profile.kv_bytes_per_token / 2**20
        rate = sum(planner.mix.class_rates(r.capacity, planner.catalog).values())
        t.add_row(
            r.setting.policy,
            str(r.batch_cap),
            f"{r.kv_tokens} ({mib:.0f} MiB)",
            capacity_text(r),
            ", ".join(f"{k} {n}" for k, n in planner.mix.counts(r.capacity).items()),
            f"{rate:.2f}",
            _classes(at.judged) if at else "-",
            f"{fail.robots}: {_classes(fail.judged)}" if fail else "-",
            _busy(at),
            str(len(r.points)),
        )
    return t


def _point_json(point: SizePoint) -> dict[str, Any]:
    return {
        "robots": point.robots,
        "counts": point.counts,
        "duration_s": point.duration_s,
        "met": point.met,
        "judged": point.judged,
        "runs": [
            {
                "seed": run.seed,
                "tasks": run.tasks,
                "engine_busy_share": run.engine_busy_share,
                "wall_s": run.wall_s,
                "classes": {
                    cls: {
                        "tasks": v.tasks,
                        "completed": v.completed,
                        "value": v.value,
                        "mean_utility": v.mean_utility,
                    }
                    for cls, v in run.classes.items()
                },
            }
            for run in point.runs
        ],
    }


def to_json(
    planner: CapacityPlanner,
    results: list[SettingResult],
    tokenizer_source: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    settings = []
    for r in results:
        b = r.boundary
        at = r.points.get(b.passed)
        settings.append(
            {
                "label": r.setting.label,
                "policy": r.setting.policy,
                "max_batch": r.setting.max_batch,
                "batch_cap": r.batch_cap,
                "kv_tokens": r.kv_tokens,
                "kv_bytes": r.kv_tokens * planner.profile.kv_bytes_per_token,
                "interrupted": r.interrupted,
                "capacity": b.passed,
                "capacity_counts": planner.mix.counts(b.passed) if b.passed else {},
                "failed_at": b.failed,
                "at_limit": b.at_limit and not r.interrupted,
                "tasks_per_s_at_capacity": sum(
                    planner.mix.class_rates(b.passed, planner.catalog).values()
                ),
                "judged_at_capacity": at.judged if at else None,
                "search_order": list(b.tried),
                "points": [_point_json(r.points[n]) for n in sorted(r.points)],
            }
        )
    doc = {
        "format": FORMAT,
        "version": 1,
        "note": SIMULATION_NOTE,
        "simulated": True,
        "mix": planner.mix.model_dump(mode="json"),
        "profile": planner.profile.name,
        "profile_source": planner.profile.source,
        "tokenizer": tokenizer_source,
        "target": {**planner.target.model_dump(), "meaning": planner.target.describe()},
        "search": planner.search.model_dump(mode="json"),
        "settings": settings,
        **(extra or {}),
    }
    return dict(json_safe(doc))


def write_json(doc: dict[str, Any], path: Path) -> None:
    """Atomically, so an interrupted write leaves no half file."""
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    write_atomically(path, text.encode(), "capacity results")
