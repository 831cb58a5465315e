"""The fleet's 8 variants as LRTrace traffic through the service (one run, issue #25):
drones and arms tagged with the 8 shipped fine-tunes (`lrtrace compose --variants`),
replayed on the `service` target (the PlanningService on one torch engine, the real
clock, simulated robots), so one engine serves every variant in mixed batches under
the service's own scheduler. At each rate, on the same trace and engine, one after
another:

- `variants, timely`: every agent on its variant, the TimelyLLM policy;
- `variants, fcfs`: the same, first come first served (the vLLM-style baseline);
- `base, timely`: the same tasks with every agent on the base model (what serving
  the variants costs).

Per contender: share of the maximum utility (urgent, normal), response p95, engine
busy seconds, and plan tokens per busy second.

    PYTHONPATH=. .venv/bin/python bench/fleet_traffic_service.py [--eps 4,8,12] [--duration 10]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.metrics import run_stats
from lrtrace.replay.runner import replay
from lrtrace.replay.targets.common import ReplayServiceOptions
from lrtrace.replay.targets.service import ServiceTarget
from lrtrace.results_format import RunRecord
from lrtrace.trace_format import TraceFile
from lrtrace.variants import with_variants
from lrtrace.workload import WorkloadSpec
from robot_models.checkpoints import default_planner_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord

RESULTS = Path(__file__).resolve().parent / "results" / "fleet_traffic_service.json"
VARIANTS = {
    "drone": (
        "warehouse-drone",
        "heavy-drone",
        "hospital-drone",
        "indoor-drone",
        "warehouse-drone-full",
    ),
    "arm": ("packing-arm", "parallel-gripper-arm", "lab-arm"),
}


def trace_at(eps: float, duration_s: float, agents: int, seed: int) -> TraceFile:
    spec = WorkloadSpec(
        name=f"fleet-variants-{eps:g}eps",
        eps=eps,
        max_tpe=4,
        trace_ids=tuple(range(1, 12)),
        agents=agents,
        duration_s=duration_s,
        seed=seed,
    )
    return compose(spec, load_catalog())


def summary(run: RunRecord, tokenizer: Any) -> dict[str, Any]:
    groups = {g.group: g for g in run_stats(run)}
    tokens = sum(len(tokenizer.encode(t.plan_text).ids) for t in run.tasks if t.success)
    busy = run.engine_busy_s or float("nan")

    def share(group: str) -> float | None:
        g = groups.get(group)
        return None if g is None else g.utility_of_max

    urgent = [g for name, g in groups.items() if name.startswith("urgent-")]
    normal = [g for name, g in groups.items() if name.startswith("normal-")]

    def pooled(gs: list[Any]) -> float | None:
        done = sum(g.completed for g in gs)
        if not done:
            return None
        return sum(g.utility_of_max * g.completed for g in gs) / done

    return {
        "tasks": len(run.tasks),
        "succeeded": sum(t.success for t in run.tasks),
        "urgent_utility_of_max": pooled(urgent),
        "normal_utility_of_max": pooled(normal),
        "all_utility_of_max": share("all"),
        "response_p95_s": groups["all"].response_s.p95,
        "engine_busy_s": busy,
        "plan_tokens": tokens,
        "tokens_per_busy_s": tokens / busy,
        "per_variant_utility_of_max": {
            name.removeprefix("variant "): g.utility_of_max
            for name, g in groups.items()
            if name.startswith("variant ")
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--eps", default="4,8,12", help="event rates, comma-separated")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--agents", type=int, default=16, help="per robot type")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    machine = MachineRecord()
    console = Console(width=max(Console().width, 120))
    target = ServiceTarget.from_checkpoint(None, args.threads, options=ReplayServiceOptions())
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(default_planner_path() / "tokenizer.json"))
    rows: dict[str, dict[str, Any]] = {}
    for eps in (float(e) for e in args.eps.split(",")):
        base_trace = trace_at(eps, args.duration, args.agents, args.seed)
        tagged = with_variants(base_trace, dict(VARIANTS))
        for label, trace, policy in (
            ("variants, timely", tagged, "timely"),
            ("variants, fcfs", tagged, "fcfs"),
            ("base, timely", base_trace, "timely"),
        ):
            results, interrupted = replay(trace, target, [policy], [None], None, console)
            if interrupted:
                return 130
            rows[f"{eps:g} eps, {label}"] = {
                "eps": eps,
                "contender": label,
                **summary(results.runs[0], tokenizer),
            }
    weights = target._engine.resident_weights()  # type: ignore[attr-defined]
    result = {
        "machine": machine.done(),
        "duration_s": args.duration,
        "agents_per_type": args.agents,
        "variants": VARIANTS,
        "resident_weights": {
            "base_bytes": weights.base_bytes,
            "total_bytes": weights.total_bytes,
            "variants": weights.names(),
        },
        "rows": rows,
    }
    _print(result, console)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {args.out}")
    return 0


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _print(result: dict[str, Any], console: Console) -> None:
    table = Table(title="8 fleet variants through the service (one engine), same traces")
    columns = ("rate, contender", "done/n", "urgent util", "normal util", "resp p95 s")
    for column in (*columns, "busy s", "tok / busy s"):
        table.add_column(column, justify="right")
    for name, row in result["rows"].items():
        table.add_row(
            name,
            f"{row['succeeded']}/{row['tasks']}",
            _pct(row["urgent_utility_of_max"]),
            _pct(row["normal_utility_of_max"]),
            f"{row['response_p95_s']:.2f}",
            f"{row['engine_busy_s']:.1f}",
            f"{row['tokens_per_busy_s']:.0f}",
        )
    console.print(table)
    w = result["resident_weights"]
    console.print(
        f"weights held: {w['total_bytes']:,} bytes ({w['total_bytes'] / w['base_bytes']:.3f}x "
        f"the base) for {len(w['variants'])} variants"
    )
    console.print(MachineRecord.line(result["machine"]))


if __name__ == "__main__":
    raise SystemExit(main())
