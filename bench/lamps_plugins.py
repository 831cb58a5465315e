"""LAMPS over the tool plugins: the API mix (LAMPS Table 2 classes) with every call
answered by its class's plugin process through the service's ToolRouter, on the
real clock and the real torch engine; lamps vs infercept vs vllm-like at three
request rates, and how each tool's predicted answer time converged.

lrtrace/api_mix_plugins.py serves it: the planner checkpoint on this CPU (1 thread)
forced to the trace's replies (the calls written in plan call syntax), each
sentence ending in a call suspended until the plugin answered, its KV decided by
`auto` on the tool's predicted answer time (the per-tool running statistics,
from the declared table mean as prior, learning from each measured answer).

SCALED: call durations are the table's times `--scale` (default 1/100: a chatbot
call ~0.29 s; math really computes), since plugins answer on the real clock; the
rates are the same scaled-up ones as bench/lamps_real.py (4, 16, 64 /s, 30
requests each) and device KV 3072 tokens (bench/lamps_real.py: 2048; the calls written
out make the longest reply ~2,050 tokens with its prompt), so that requests contend. Each row is
one run on a loaded machine; the rows run one after another.

    PYTHONPATH=. .venv/bin/python bench/lamps_plugins.py [--requests N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from lrtrace.api_mix import API_CLASSES, compose_api_mix
from lrtrace.api_mix_plugins import DEFAULT_SCALE, PluginRun, run_plugin_mix
from lrtrace.api_mix_torch import ForcedTorchEngine
from lrtrace.profiles import load as load_profile
from lrtrace.replay.targets.common import planner_tokenizer
from robot_models.checkpoints import default_planner_path
from timely_core.engine.paged_engine import PagedEngine
from timely_core.engine.sim.engine import Script
from timely_core.engine.torch.config import EngineConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord

RESULTS = Path(__file__).resolve().parent / "results"
RATES = (4.0, 16.0, 64.0)  # as bench/lamps_real.py
POLICIES = ("lamps", "infercept", "vllm-like")
KV_TOKENS = 3072  # device KV (the longest reply, calls written out, is ~2,050 tokens); host 4x
SEED = 11
# plugin processes per class: each answers one call at a time, and at the top rate
# several requests of a class are out at once (with one, answers queue behind each
# other and the table's durations no longer hold: NOTES.md)
POOL = 4


def _summary(run: PluginRun, wall_s: float) -> dict[str, Any]:
    e2e, ttft = run.e2e_s(), run.ttft_s()
    state = run.service._state
    failed = [
        o.request.request_id for o in run.outcomes if o.result is None or not o.result.success
    ]
    return {
        "completed": len(e2e),
        "requests": len(run.outcomes),
        "failed": failed,
        "e2e_mean_s": float(np.mean(e2e)),
        "e2e_p99_s": float(np.percentile(e2e, 99)),
        "ttft_mean_s": float(np.mean(ttft)),
        "ttft_p99_s": float(np.percentile(ttft, 99)),
        "throughput_rps": len(e2e) / run.makespan_s,
        "calls": sum(o.calls for o in run.outcomes),
        "kv_stalls": state.counters["kv_stalls"],
        "decided": run.counts,
        "tools": {
            name: {
                "prior_s": t.prior_s,
                "table_mean_s": t.table_mean_s,
                "first_prediction_s": t.predicted_s[0] if t.predicted_s else None,
                "final_prediction_s": t.final_s,
                "measured_mean_s": t.measured_mean_s,
                "answers": t.samples,
            }
            for name, t in run.tools.items()
        },
        "wall_s": wall_s,
    }


def _run(
    rate: float, requests: int, policy: str, scale: float, priors: bool, pool: int
) -> dict[str, Any]:
    tokenizer, _ = planner_tokenizer()
    profile = load_profile("measured-torch-planner-cpu")
    config = EngineConfig(
        device_kv_bytes=KV_TOKENS * profile.kv_bytes_per_token,
        host_kv_bytes=4 * KV_TOKENS * profile.kv_bytes_per_token,
        num_threads=1,
    )

    def engine(script: Script) -> PagedEngine:
        return ForcedTorchEngine(default_planner_path(), config, script)

    mix = compose_api_mix(rate, requests, seed=SEED)
    started = time.perf_counter()
    run = run_plugin_mix(
        mix, policy, tokenizer, engine, scale=scale, seed=SEED, priors=priors, pool=pool
    )
    return _summary(run, time.perf_counter() - started)


def _table(console: Console, runs: dict[str, dict[str, dict[str, Any]]], title: str) -> None:
    table = Table(title=title)
    for column in ("rate /s", "policy", "done", "E2E mean s", "E2E p99 s", "TTFT mean ms",
                   "TTFT p99 ms", "req/s", "tool waits (pres/swap/disc)", "wall s"):  # fmt: skip
        table.add_column(column)
    for rate, by_policy in runs.items():
        for policy, r in by_policy.items():
            d = r["decided"]
            waits = "/".join(str(d.get(f"tool-{s}", 0)) for s in ("preserve", "swap", "discard"))
            table.add_row(
                rate,
                policy,
                f"{r['completed']}/{r['requests']}",
                f"{r['e2e_mean_s']:.3f}",
                f"{r['e2e_p99_s']:.3f}",
                f"{1000 * r['ttft_mean_s']:.1f}",
                f"{1000 * r['ttft_p99_s']:.1f}",
                f"{r['throughput_rps']:.2f}",
                waits,
                f"{r['wall_s']:.0f}",
            )
    console.print(table)


def _convergence_table(console: Console, label: str, r: dict[str, Any]) -> None:
    table = Table(title=f"per-tool answer time (ms), {label}: prior -> first -> final vs measured")
    for column in ("class", "answers", "table mean", "prior", "at 1st call", "final",
                   "measured mean", "final error"):  # fmt: skip
        table.add_column(column)

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{1000 * value:.3f}"

    for name, t in r["tools"].items():
        final, measured = t["final_prediction_s"], t["measured_mean_s"]
        error = "-" if final is None else f"{100 * (final / measured - 1):+.0f}%"
        table.add_row(name, str(t["answers"]), ms(t["table_mean_s"]), ms(t["prior_s"]),
                      ms(t["first_prediction_s"]), ms(final), ms(measured), error)  # fmt: skip
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30, help="requests per rate")
    parser.add_argument("--scale", type=float, default=DEFAULT_SCALE, help="call time factor")
    parser.add_argument(
        "--pool", type=int, default=POOL, help="plugin processes (robots) per class"
    )
    parser.add_argument("--quick", action="store_true", help="6 requests per rate, a smoke run")
    args = parser.parse_args()
    if args.requests < 2 or not 0 < args.scale <= 1 or args.pool < 1:
        parser.error(
            f"need --requests >= 2 and 0 < --scale <= 1, got {args.requests}, {args.scale}"
        )
    requests = 6 if args.quick else args.requests
    console = Console(width=200)
    machine = MachineRecord()
    started = time.perf_counter()
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for rate in RATES:
        for policy in POLICIES:
            runs.setdefault(f"{rate:g}", {})[policy] = _run(
                rate, requests, policy, args.scale, True, args.pool
            )
            console.log(f"rate {rate:g} {policy}: done")
    top = f"{max(RATES):g}"
    no_prior = _run(max(RATES), requests, "lamps", args.scale, False, args.pool)
    record = machine.done()
    console.print(
        f"API mix through tool plugins, {requests} requests per rate, scale {args.scale:g}, "
        f"device KV {KV_TOKENS} tokens, {args.pool} plugin process(es) per class; "
        f"{MachineRecord.line(record)}"
    )
    _table(console, runs, "lamps vs infercept vs vllm-like, real torch engine, real clock")
    _convergence_table(console, f"lamps at {top}/s, table mean as prior", runs[top]["lamps"])
    _convergence_table(console, f"lamps at {top}/s, no prior", no_prior)
    top_runs = runs[top]
    goals = {
        "lamps_e2e_gain_vs_infercept_at_top_rate": 1
        - top_runs["lamps"]["e2e_mean_s"] / top_runs["infercept"]["e2e_mean_s"],
        "lamps_ttft_lower_at_every_rate": all(
            r["lamps"]["ttft_mean_s"] < r["infercept"]["ttft_mean_s"] for r in runs.values()
        ),
    }
    console.print(f"goals: {goals}")
    doc = {
        "bench": "lamps_plugins",
        "scaled": f"call durations x{args.scale:g} (real clock), {requests} requests per rate, "
        f"rates {RATES}, device KV {KV_TOKENS} tokens",
        "classes": {
            api.name: {"duration_s": api.duration_s, "calls": api.calls} for api in API_CLASSES
        },
        "pool": args.pool,
        "machine": record,
        "wall_s": time.perf_counter() - started,
        "runs": runs,
        "no_prior_lamps_top_rate": no_prior,
        "goals": goals,
    }
    RESULTS.mkdir(exist_ok=True)
    name = "lamps_plugins" + ("" if args.pool == POOL else f"_pool{args.pool}")
    out = RESULTS / (name + ("_quick" if args.quick else "") + ".json")
    out.write_text(json.dumps(doc, indent=2) + "\n")
    console.print(f"results: {out}")


if __name__ == "__main__":
    main()
