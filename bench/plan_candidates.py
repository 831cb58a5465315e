"""Plan candidates (`ServiceConfig.plan_candidates`, timely_core/engine/plan_candidates.py)
on the service: each plan decoded greedily beside n sampled alternatives, the kept one
the best by log-probability plus a coverage reward per word of the request's names.
Rows: the service's default (no candidates), then the first n of `--candidates` with
each coverage weight of `--weights`, then the other n at the chosen weight; each row
plans the template held-out set and the 11 LRTrace tasks (the gates: plans exact) and
the hand-written natural set (grounded, sensible), under the plan grammar with
closing and the copy bias, and its wall time (the candidates' cost).

The weight is chosen on the template sets only: the largest of the grid whose held-out
exact count is at least the default service's and whose LRTrace plans are all exact.
The natural set is reported beside it, never used to choose. Log-probabilities are
the checkpoint's own scale, so a new checkpoint reruns this.

    PYTHONPATH=. .venv/bin/python bench/plan_candidates.py [--candidates 8,16]
        [--weights 0,2,4,8,16,24,32,48,64]

Writes bench/results/plan_candidates.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord
from natural_eval import Case, cases_of, score, serve

from robot_models.checkpoints import default_planner_path
from timely_core.service_config import ServiceConfig

RESULTS = Path(__file__).resolve().parent / "results" / "plan_candidates.json"
SETS = ("heldout", "lrtrace", "natural")


def chosen(baseline: dict[str, Any], rows: list[dict[str, Any]]) -> float:
    """The largest weight that keeps the default service's held-out exact count and
    every LRTrace plan exact (the first weight if none does)."""
    floor = baseline["heldout"]["exact"]
    keeping = [
        r["weight"]
        for r in rows
        if r["heldout"]["exact"] >= floor and r["lrtrace"]["exact"] == r["lrtrace"]["plans"]
    ]
    return max(keeping) if keeping else rows[0]["weight"]


def _parse(text: str, kind: type, name: str, parser: argparse.ArgumentParser) -> list[Any]:
    try:
        values = [kind(v) for v in text.split(",")]
    except ValueError:
        parser.error(f"--{name}: comma-separated numbers, got {text!r}")
    if not values or any(v < 0 for v in values):
        parser.error(f"--{name}: non-negative numbers, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=default_planner_path())
    parser.add_argument("--candidates", default="8,16")
    parser.add_argument("--weights", default="0,2,4,8,16,24,32,48,64")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--robots", type=int, default=12, help="robots per type at once")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    counts = _parse(args.candidates, int, "candidates", parser)
    weights = sorted(set(_parse(args.weights, float, "weights", parser)))
    if any(n < 1 for n in counts):
        parser.error("--candidates: at least 1 alternative per row")
    torch.set_num_threads(args.threads)
    machine = MachineRecord()  # load average, then the matmul peak
    started = time.perf_counter()
    cases = cases_of()

    def row(candidates: int, weight: float) -> dict[str, Any]:
        figures: dict[str, Any] = {"candidates": candidates, "weight": weight}
        for name in SETS:
            figures[name] = _plan(args, cases[name], candidates, weight)
        print(f"n={candidates} weight={weight:g}: {json.dumps(figures)}", flush=True)
        return figures

    baseline = row(0, ServiceConfig().candidate_coverage_weight)
    sweep = [row(counts[0], w) for w in weights]
    pick = chosen(baseline, sweep)
    others = [row(n, pick) for n in counts[1:]]
    results = {
        "bench": "plan_candidates",
        "model": str(args.model),
        "rule": "largest weight keeping the default's held-out exact count and LRTrace 11/11",
        "chosen_weight": pick,
        "service_default_weight": ServiceConfig().candidate_coverage_weight,
        "baseline": baseline,
        "sweep": sweep,
        "others": others,
        "machine": machine.done_with_platform(),
        "seconds": time.perf_counter() - started,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print_table(results, Console(width=150))
    return 0


def _plan(args: argparse.Namespace, cases: list[Case], candidates: int, weight: float) -> Any:
    started = time.perf_counter()
    plans = serve(
        args.model, cases, True, args.robots, args.threads, ServiceConfig().grammar_close_within,
        plan_candidates=candidates, coverage_weight=weight,
    )  # fmt: skip
    figures = {k: v for k, v in score(cases, plans).items() if k != "by_robot"}
    figures["seconds"] = time.perf_counter() - started
    return figures


def print_table(results: dict[str, Any], console: Console) -> None:
    table = Table(title="Plan candidates on the service (plan grammar, closing, copy bias)")
    for column in ("candidates", "weight", "held-out exact", "LRTrace exact",
                   "natural grounded", "natural sensible", "natural valid",
                   "seconds (all sets)"):  # fmt: skip
        table.add_column(column, justify="right")
    rows = [results["baseline"], *results["sweep"], *results["others"]]
    for i, row in enumerate(rows):
        h, lr, n = row["heldout"], row["lrtrace"], row["natural"]
        mark = " (chosen)" if i > 0 and row["weight"] == results["chosen_weight"] else ""
        table.add_row(
            str(row["candidates"]) + (" (default)" if i == 0 else ""),
            "-" if i == 0 else f"{row['weight']:g}{mark}",
            f"{h['exact']}/{h['plans']}",
            f"{lr['exact']}/{lr['plans']}",
            f"{n['grounded']}/{n['plans']}",
            f"{n['sensible']}/{n['plans']}",
            f"{n['valid']}/{n['plans']}",
            f"{sum(row[s]['seconds'] for s in SETS):.0f}",
        )
    console.print(table)
    console.print(
        f"chosen by the rule: {results['chosen_weight']:g}; ServiceConfig default: "
        f"{results['service_default_weight']:g}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
