"""Validate `lrtrace capacity` against the real engine (issue #27).

For two fleet mixes (the built-in `drones` and `drones-arms`), predict the capacity
of one engine with the simulator on this machine's measured latency profile
(`measured-torch-planner-cpu`), then replay fleets of 80%, 100% and 120% of that
size on the REAL TorchEngine (the planner checkpoint in the in-process service, as
`bench/lrtrace_paper.py --real` does, one torch thread as the profile was measured)
and, for a like-for-like comparison, the same traces (seed 0) on the simulator. At
each size: is the target met, and the judged values (urgent: share of tasks at full
utility; normal: mean utility over the maximum) measured vs predicted.

The prediction uses the same replay duration as the real runs (short replays hide a
slow overload), and the baseline - the prediction - is made in the same run.
Real runs are wall-clock and depend on the machine's other load: the 1-minute load
average is recorded at the start and end of every real run.

    PYTHONPATH=. .venv/bin/python bench/lrtrace_capacity.py            # the validation
    PYTHONPATH=. .venv/bin/python bench/lrtrace_capacity.py --sim-only # no real engine
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from rich.console import Console
from rich.table import Table

from lrtrace.capacity import CapacityPlanner, SearchConfig, Setting, SizePoint, replay_duration
from lrtrace.capacity_report import to_json
from lrtrace.capacity_target import CapacityTarget, class_values, meets
from lrtrace.catalog import load_catalog
from lrtrace.fleet_compose import compose_fleet
from lrtrace.fleet_mix import FleetMix, load_mix
from lrtrace.plots import SIM_STAMP
from lrtrace.profiles import load
from lrtrace.replay.target import ReplayTarget
from lrtrace.replay.targets.common import planner_tokenizer
from lrtrace.report import json_safe
from lrtrace.results_format import TaskRecord

RESULTS = Path(__file__).resolve().parent / "results"
PROFILE = "measured-torch-planner-cpu"
MIXES = ("drones", "drones-arms")


def load_1min() -> float:
    return os.getloadavg()[0]


def replay_once(
    target: ReplayTarget, mix: FleetMix, robots: int, duration_s: float, policy: str
) -> dict[str, Any]:
    """Seed 0 of a fleet on one target: verdict, judged values, engine busy share."""
    catalog = load_catalog()
    trace = compose_fleet(mix, robots, duration_s, 0, catalog)
    records: list[TaskRecord] = []
    load_start = load_1min()
    started = time.perf_counter()
    busy = target.run(trace, policy, None, records, lambda _r: None, threading.Event())
    wall = time.perf_counter() - started
    values = class_values(records)
    met, judged = meets(TARGET, [values], "all")
    return {
        "met": met,
        "judged": judged,
        "mean_utility": {c: v.mean_utility for c, v in values.items()},
        "completed": sum(v.completed for v in values.values()),
        "tasks": len(trace.tasks),
        "engine_busy_share": None if busy is None else busy / duration_s,
        "wall_s": wall,
        "load_1min_start": load_start,
        "load_1min_end": load_1min(),
    }


TARGET = CapacityTarget()  # the defaults: 95% urgent at full utility, normal at 90%


def validation_sizes(capacity: int, fractions: Sequence[float]) -> list[tuple[float, int]]:
    return [(f, max(1, round(f * capacity))) for f in fractions]


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def values_text(judged: dict[str, float]) -> str:
    return ", ".join(f"{c} {100 * v:.1f}%" for c, v in judged.items())


def figure(doc: dict[str, Any], path: Path) -> Path:
    """Per mix and task class: the search's judged values (median of the seeds) vs
    fleet size, the seed-0 sim and real values at the validation sizes, the target."""
    mixes = list(doc["mixes"])
    classes = sorted(
        {c for m in doc["mixes"].values() for p in m["predicted"]["points"] for c in p["judged"]}
    )
    fig, axes = plt.subplots(
        len(mixes), len(classes), figsize=(4.6 * len(classes), 3.6 * len(mixes)), squeeze=False
    )
    for row, name in zip(axes, mixes, strict=True):
        m = doc["mixes"][name]
        for ax, cls in zip(row, classes, strict=True):
            pts = [p for p in m["predicted"]["points"] if cls in p["judged"]]
            if not pts:
                ax.set_visible(False)
                continue
            ax.plot(
                [p["robots"] for p in pts],
                [100 * p["judged"][cls] for p in pts],
                marker=".",
                color="tab:blue",
                label="sim search (median of seeds)",
            )
            checks = m["validation"]
            for key, style, label in (("sim", "s", "sim, seed 0"), ("real", "o", "REAL, seed 0")):
                xs = [v["robots"] for v in checks if v.get(key) and cls in v[key]["judged"]]
                ys = [
                    100 * v[key]["judged"][cls]
                    for v in checks
                    if v.get(key) and cls in v[key]["judged"]
                ]
                color = "tab:orange" if key == "sim" else "black"
                ax.plot(xs, ys, marker=style, ls="", color=color, label=label)
            threshold = TARGET.threshold(cls.split("-", 1)[0])
            ax.axhline(100 * threshold, color="tab:red", ls="--", lw=1, label="target")
            ax.axvline(m["predicted"]["capacity"], color="tab:blue", ls=":", lw=1)
            ax.set_title(f"{name}: {cls}", fontsize=9)
            ax.set_xlabel("fleet size (robots)")
            ax.set_ylabel(
                "share at full utility (%)" if cls.startswith("urgent") else "utility / max (%)"
            )
            ax.set_ylim(-2, 102)
            ax.legend(fontsize=6)
    fig.suptitle(
        f"lrtrace capacity vs the real engine ({doc['profile']}; sim: {SIM_STAMP})", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sim-only", action="store_true", help="no real engine; separate output")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals per replay")
    p.add_argument("--seeds", type=int, default=3, help="seeds per size in the prediction")
    p.add_argument("--precision", type=float, default=0.05, help="of the predicted capacity")
    p.add_argument("--policy", default="timely")
    p.add_argument(
        "--fractions", default="0.8,1.0,1.2", help="fleet sizes replayed, of the predicted capacity"
    )
    p.add_argument("--mixes", default=",".join(MIXES))
    p.add_argument("--threads", type=int, default=1, help="torch threads of the real engine")
    p.add_argument("--model", type=Path, help="checkpoint of the real engine (default: planner)")
    args = p.parse_args(argv)
    fractions = [float(f) for f in args.fractions.split(",") if f]
    console = Console(width=max(Console().width, 180))  # the table needs the room
    catalog = load_catalog()
    profile = load(PROFILE)
    tokenizer, tokenizer_source = planner_tokenizer()
    search = SearchConfig(seeds=args.seeds, duration_s=args.duration, precision=args.precision)
    stem = "lrtrace_capacity_sim_only" if args.sim_only else "lrtrace_capacity"
    out = RESULTS / f"{stem}.json"
    real: ReplayTarget | None = None
    doc: dict[str, Any] = {
        "note": "predicted = SIMULATION in virtual time on the measured profile; real = "
        "measured on the TorchEngine (wall clock, this shared machine)",
        "profile": PROFILE,
        "policy": args.policy,
        "target": {**TARGET.model_dump(), "meaning": TARGET.describe()},
        "search": search.model_dump(mode="json"),
        "real_replays": "seed 0 of each size, one run each, judged with rule 'all' (one seed)",
        "fractions": fractions,
        "threads": args.threads,
        "tokenizer": tokenizer_source,
        "cpus": os.cpu_count(),
        "load_1min_at_start": load_1min(),
        "mixes": {},
    }
    if not args.sim_only:
        from lrtrace.replay.targets.service import ServiceTarget
        from robot_models.checkpoints import default_planner_path

        real = ServiceTarget.from_checkpoint(args.model, args.threads)
        doc["model"] = str(args.model or default_planner_path())
    started = time.perf_counter()
    for name in args.mixes.split(","):
        mix = load_mix(name, catalog)

        def progress(setting: Setting, point: SizePoint, mix_name: str = name) -> None:
            console.print(
                f"{mix_name} {setting.label}: {point.robots} robots "
                f"{'meets' if point.met else 'fails'} ({values_text(point.judged)})",
                soft_wrap=True,
            )

        planner = CapacityPlanner(
            mix, catalog, profile, tokenizer, TARGET, search, on_point=progress
        )
        t0 = time.perf_counter()
        (result,) = planner.run([Setting(args.policy)])
        predicted = to_json(planner, [result], tokenizer_source)["settings"][0]
        entry: dict[str, Any] = {"predicted": predicted, "search_wall_s": time.perf_counter() - t0}
        entry["validation"] = checks = []
        sim = planner.sim_target(None)
        for fraction, robots in validation_sizes(result.capacity, fractions):
            duration = replay_duration(mix, robots, catalog, search)
            check: dict[str, Any] = {
                "fraction": fraction,
                "robots": robots,
                "counts": mix.counts(robots),
                "duration_s": duration,
                "sim": replay_once(sim, mix, robots, duration, args.policy),
            }
            if real is not None:
                console.print(f"{name}: REAL engine, {robots} robots ({100 * fraction:.0f}%)")
                check["real"] = replay_once(real, mix, robots, duration, args.policy)
            checks.append(check)
            doc["mixes"][name] = entry
            out.write_text(json.dumps(json_safe(doc), indent=1) + "\n")  # keep what is done
    for entry in doc["mixes"].values():
        entry["comparison"] = compare(entry)
    doc["wall_s"] = time.perf_counter() - started
    doc["load_1min_at_end"] = load_1min()
    doc["summary"] = rows = summary_rows(doc)
    out.write_text(json.dumps(json_safe(doc), indent=1) + "\n")
    figure(doc, RESULTS / f"{stem}.png")
    table = Table(title=f"lrtrace capacity vs the real engine ({PROFILE}, {args.policy})")
    for col in ("mix", "size", "robots", "predicted", "sim, seed 0", "REAL, seed 0"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print(f"results: {out}")
    return 0


def compare(entry: dict[str, Any]) -> dict[str, Any] | None:
    """How far prediction and measurement differ at each size: same verdict or not,
    and real minus sim (seed 0, same trace) per class in percentage points; and
    where the real capacity lies among the sizes tried."""
    checks = [c for c in entry["validation"] if c.get("real")]
    if not checks:
        return None
    met = [c["fraction"] for c in checks if c["real"]["met"]]
    failed = [c["fraction"] for c in checks if not c["real"]["met"]]
    return {
        "same_verdict_as_prediction": {
            str(c["fraction"]): c["real"]["met"] == (c["robots"] <= entry["predicted"]["capacity"])
            for c in checks
        },
        "same_verdict_as_sim_seed0": {
            str(c["fraction"]): c["real"]["met"] == c["sim"]["met"] for c in checks
        },
        "real_minus_sim_pp": {
            str(c["fraction"]): {
                cls: 100 * (v - c["sim"]["judged"][cls])
                for cls, v in c["real"]["judged"].items()
                if cls in c["sim"]["judged"]
            }
            for c in checks
        },
        "real_met_up_to_fraction": max(met) if met else None,
        "real_failed_from_fraction": min(failed) if failed else None,
    }


def summary_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, m in doc["mixes"].items():
        pred = m["predicted"]
        for check in m["validation"]:
            sim, real = check["sim"], check.get("real")
            rows.append(
                [
                    name,
                    f"{100 * check['fraction']:.0f}%",
                    str(check["robots"]),
                    ("meets" if check["robots"] <= pred["capacity"] else "fails")
                    + f" (capacity {pred['capacity']})",
                    f"{verdict(sim['met'])}: {values_text(sim['judged'])}",
                    "-"
                    if real is None
                    else f"{verdict(real['met'])}: {values_text(real['judged'])}",
                ]
            )
    return rows


if __name__ == "__main__":
    sys.exit(main())
