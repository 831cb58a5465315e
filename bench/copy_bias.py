"""The copy bias (`ServiceConfig.copy_bias`, timely_core/engine/copy_bias.py) swept
on the service: for each bias, the template held-out set and the 11 LRTrace tasks
(the gates: held-out plans exact, LRTrace plans exact) and the hand-written natural
set (grounded, sensible), all greedy under the plan grammar with closing.

The default is chosen on the template sets only: the largest bias of the grid whose
held-out exact count is at least the unbiased one's and whose LRTrace plans are all
exact. The natural set is reported beside it, never used to choose. Logits are the
checkpoint's own scale, so a new checkpoint reruns this.

    PYTHONPATH=. .venv/bin/python bench/copy_bias.py [--biases 0,2,4,6,8,10,12,16]

Writes bench/results/copy_bias.json.
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
from natural_eval import cases_of, score, serve

from robot_models.checkpoints import default_planner_path
from timely_core.service_config import ServiceConfig

RESULTS = Path(__file__).resolve().parent / "results" / "copy_bias.json"
SETS = ("heldout", "lrtrace", "natural")


def chosen(rows: list[dict[str, Any]]) -> float:
    """The largest bias that keeps the unbiased held-out exact count and every
    LRTrace plan exact (`rows` sorted by bias, the first unbiased)."""
    floor = rows[0]["heldout"]["exact"]
    keeping = [
        r["bias"]
        for r in rows
        if r["heldout"]["exact"] >= floor and r["lrtrace"]["exact"] == r["lrtrace"]["plans"]
    ]
    return max(keeping)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=default_planner_path())
    parser.add_argument("--biases", default="0,2,4,6,8,10,12,16")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--robots", type=int, default=12, help="robots per type at once")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    try:
        biases = sorted({float(b) for b in args.biases.split(",")})
    except ValueError:
        parser.error(f"--biases: comma-separated numbers, got {args.biases!r}")
    if not biases or biases[0] != 0.0 or any(b < 0 for b in biases):
        parser.error("--biases: non-negative numbers, 0 among them (the unbiased baseline)")
    torch.set_num_threads(args.threads)
    machine = MachineRecord()  # load average, then the matmul peak
    started = time.perf_counter()
    cases = cases_of()
    close_within = ServiceConfig().grammar_close_within
    rows: list[dict[str, Any]] = []
    for bias in biases:
        row: dict[str, Any] = {"bias": bias}
        for name in SETS:
            plans = serve(
                args.model, cases[name], True, args.robots, args.threads, close_within,
                copy_bias=bias,
            )  # fmt: skip
            figures = score(cases[name], plans)
            row[name] = {k: v for k, v in figures.items() if k != "by_robot"}
        rows.append(row)
        print(f"bias {bias:g}: {json.dumps({n: row[n] for n in SETS})}", flush=True)
    pick = chosen(rows)
    results = {
        "bench": "copy_bias",
        "model": str(args.model),
        "rule": "largest bias keeping the unbiased held-out exact count and LRTrace 11/11",
        "chosen": pick,
        "service_default": ServiceConfig().copy_bias,
        "rows": rows,
        "machine": machine.done_with_platform(),
        "seconds": time.perf_counter() - started,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print_table(results, Console(width=140))
    return 0


def print_table(results: dict[str, Any], console: Console) -> None:
    table = Table(title="Copy bias on the service (greedy, plan grammar, closing)")
    for column in ("bias", "held-out exact", "held-out valid", "LRTrace exact",
                   "natural grounded", "natural sensible", "natural valid"):  # fmt: skip
        table.add_column(column, justify="right")
    for row in results["rows"]:
        h, lr, n = row["heldout"], row["lrtrace"], row["natural"]
        mark = " (chosen)" if row["bias"] == results["chosen"] else ""
        table.add_row(
            f"{row['bias']:g}{mark}",
            f"{h['exact']}/{h['plans']}",
            f"{h['valid']}/{h['plans']}",
            f"{lr['exact']}/{lr['plans']}",
            f"{n['grounded']}/{n['plans']}",
            f"{n['sensible']}/{n['plans']}",
            f"{n['valid']}/{n['plans']}",
        )
    console.print(table)
    console.print(
        f"chosen by the rule: {results['chosen']:g}; ServiceConfig default: "
        f"{results['service_default']:g}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
