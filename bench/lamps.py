"""LAMPS on the simulator (virtual time, the paper's Llama3-8B / RTX 4090 profile):
one run, four studies, baselines measured in the same run.

1. Memory-bound fleet (lrtrace mix `memory-bound`: long arm plans with long
   executions beside bursts of urgent drone tasks; device KV sized so that the
   robots' prompt prefixes and about a third of the fleet's task contexts fit),
   `timely` with each handling strategy: auto, preserve, swap, discard, ttl.
   Goal: auto >= the best fixed strategy on urgent utility, normal utility within
   5%, memory stalls (admissions stopped short of KV memory, plus preemptions of
   KV by a decode short of a block) at most half of preserve's.
2. API-augmented chat mix shaped like LAMPS Table 2 (lrtrace/api_mix.py) at three
   request rates: lamps vs infercept vs vllm-like; mean and p99 end-to-end
   latency, TTFT, throughput. Goal: lamps' mean E2E >= 27% below infercept's at the
   highest rate, TTFT lower at every rate.
   2b. Where the engine saturates: infercept alone at rates 1-12 /s, at the API
   study's device KV and batch cap, at half its KV, and memory-bound (2c); E2E
   less the calls' time (the queueing, decoding and KV handling a scheduler can
   shorten) and the growth of TTFT from the first to the last quarter of arrivals
   (the queue growing through the run).
   2c. The same three policies memory-bound, as LAMPS ran them on vLLM (whose
   batch memory bounds): half the device KV, a batch cap of 64 instead of 8, at
   2, 4 and 8 /s (`api_memory_bound`; same goals).
3. Misprediction: Gaussian error (5-50%) on every predicted wait, lamps at the
   middle rate, against infercept's E2E of study 2 (paper Fig. 11).
4. Scheduling cost of the lamps ranking at 1,000 queued, against timely's Eq. 4
   ranking of the same table. Goal: <= 0.2 ms.

The KV prefetch (a swapped-out waiting generation brought back while memory is
free) is in the fleet's table as on/off row pairs (auto, swap). The API mix on the
real torch engine: bench/lamps_real.py.

    PYTHONPATH=. .venv/bin/python bench/lamps.py [--quick] [--fleet-only] [--no-sweep]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from lrtrace.api_mix import compose_api_mix, run_api_mix
from lrtrace.catalog import load_catalog
from lrtrace.fleet_compose import compose_fleet
from lrtrace.fleet_mix import load_mix
from lrtrace.metrics import run_stats
from lrtrace.profiles import PAPER_PROFILE
from lrtrace.replay.exec_sampler import ExecTimeSampler
from lrtrace.replay.runner import replay
from lrtrace.replay.targets.common import planner_tokenizer
from lrtrace.replay.targets.sim import SimTarget
from timely_core.engine.block_manager import DEFAULT_BLOCK_SIZE
from timely_core.engine.sim.engine import SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.scheduling.policies import make_policy
from timely_core.scheduling.queue_table import QueueEntry, QueueTable
from timely_core.service_config import ServiceConfig

RESULTS = Path(__file__).resolve().parent / "results"
STRATEGIES = ("auto", "preserve", "swap", "discard", "ttl")
# the fleet's rows: (label, strategy, KV prefetch); the prefetch on/off pairs last
FLEET_ROWS = (
    *((s, s, True) for s in STRATEGIES),
    ("auto, no prefetch", "auto", False),
    ("swap, no prefetch", "swap", False),
)
API_POLICIES = ("lamps", "infercept", "vllm-like")
GOAL_COST_S = 0.2e-3


def fleet_study(console: Console, robots: int, duration_s: float) -> dict[str, Any]:
    from robot_models.prompts import prompt_prefix

    catalog = load_catalog()
    mix = load_mix("memory-bound", catalog)
    trace = compose_fleet(mix, robots, duration_s, seed=7, catalog=catalog)
    tokenizer, _ = planner_tokenizer()
    counts = mix.counts(robots)
    own: dict[str, float] = {}
    for rtype, group in mix.robots.items():
        tasks = [catalog[i] for i in group.trace_ids]
        own[rtype] = statistics.mean(
            len(tokenizer.encode(t.scene + t.instruction + t.golden_plan).ids) for t in tasks
        )
    prefixes = sum(len(tokenizer.encode(prompt_prefix(t)).ids) for t in mix.robots)
    contexts = sum(counts[t] * own[t] for t in mix.robots)
    kv_tokens = int(prefixes + contexts / 3) + 4 * DEFAULT_BLOCK_SIZE
    profile = PAPER_PROFILE.model_copy(update={"kv_capacity_tokens": kv_tokens})
    rows: dict[str, Any] = {}
    for label, strategy, prefetch in FLEET_ROWS:
        target = SimTarget(
            profile,
            tokenizer,
            ExecTimeSampler(),
            catalog,
            service_config=ServiceConfig(
                handling_strategy=strategy,  # type: ignore[arg-type]
                kv_prefetch=prefetch,
            ),
        )
        with tempfile.TemporaryDirectory() as tmp:
            results, _ = replay(
                trace, target, ["timely"], [None], Path(tmp) / "r.json", Console(quiet=True)
            )
        stats = {g.group: g for g in run_stats(results.runs[0])}
        engine, service = target.last_engine, target.last_service
        assert engine is not None and service is not None
        urgent, normal = stats["urgent-drone"], stats["normal-arm"]
        rows[label] = {
            "urgent_utility": urgent.utility.mean,
            "urgent_utility_of_max": urgent.utility_of_max,
            "normal_utility": normal.utility.mean,
            "normal_utility_of_max": normal.utility_of_max,
            "completed": stats["all"].completed,
            "tasks": stats["all"].tasks,
            "kv_stalls": service._state.counters["kv_stalls"],
            "engine_preemptions": engine.stats.preemptions,
            # work held up for memory: admissions stopped short of it, and running
            # generations whose decode had to preempt another's KV
            "memory_stalls": service._state.counters["kv_stalls"] + engine.stats.preemptions,
            "recomputed_tokens": engine.stats.recomputed_tokens,
            "swapped_out_blocks": engine.stats.swapped_out_blocks,
            "decided": dict(service._state.kv_handling.counts),
            "prefetch": engine.prefetch_counts(),
        }
    fixed = [rows[s] for s in STRATEGIES if s not in ("auto", "ttl")]
    auto, preserve = rows["auto"], rows["preserve"]
    best_urgent = max(r["urgent_utility"] for r in fixed)
    best_normal = max(r["normal_utility"] for r in fixed)
    goals = {
        "auto_urgent_at_least_best_fixed": auto["urgent_utility"] >= best_urgent,
        "auto_normal_within_5pct_of_best_fixed": auto["normal_utility"] >= 0.95 * best_normal,
        "auto_memory_stalls_at_most_half_of_preserve": auto["memory_stalls"]
        <= 0.5 * preserve["memory_stalls"],
    }
    table = Table(
        title=f"memory-bound fleet: {robots} robots, {len(trace.tasks)} tasks, "
        f"{duration_s:g} s, device KV {kv_tokens} tokens (timely)"
    )
    for column in (
        "strategy",
        "urgent U (of max)",
        "normal U (of max)",
        "KV stalls (admission)",
        "preemptions",
        "recomputed",
        "swapped out",
        "prefetch (hit/given up)",
        "decided",
    ):
        table.add_column(column)
    for strategy, r in rows.items():
        table.add_row(
            strategy,
            f"{r['urgent_utility']:.3f} ({r['urgent_utility_of_max']:.1%})",
            f"{r['normal_utility']:.3f} ({r['normal_utility_of_max']:.1%})",
            str(r["kv_stalls"]),
            str(r["engine_preemptions"]),
            str(r["recomputed_tokens"]),
            str(r["swapped_out_blocks"]),
            "{prefetches} ({prefetch_hits}/{prefetch_given_up})".format(**r["prefetch"]),
            ", ".join(f"{k} {v}" for k, v in sorted(r["decided"].items())),
        )
    console.print(table)
    console.print(f"goals: {goals}")
    return {
        "robots": robots,
        "tasks": len(trace.tasks),
        "duration_s": duration_s,
        "kv_tokens": kv_tokens,
        "pinned_prefix_tokens": prefixes,
        "fleet_context_tokens": contexts,
        "strategies": rows,
        "goals": goals,
    }


def _api_run(
    rate: float,
    requests: int,
    policy: str,
    noise: Callable[[float], float] | None = None,
    kv_tokens: int | None = None,
    max_batch_size: int = 8,
) -> dict[str, Any]:
    tokenizer, _ = planner_tokenizer()
    eos = tokenizer.token_to_id("<eos>")
    mix = compose_api_mix(rate, requests, seed=11)
    kv_blocks = (kv_tokens or API_KV_TOKENS) // DEFAULT_BLOCK_SIZE
    config = SimulatedEngineConfig(
        eos_token_id=int(eos), device_blocks=kv_blocks, host_blocks=4 * kv_blocks
    )
    run = run_api_mix(
        mix,
        policy,
        PAPER_LLAMA3_8B_RTX4090,
        config,
        tokenizer,
        wait_noise=noise,
        max_batch_size=max_batch_size,
    )
    e2e, ttft = run.e2e_s(), run.ttft_s()
    calls_s = float(np.mean([sum(r.call_s) for r in mix]))  # E2E's floor: the calls
    by_arrival = [o.result.ttft_s for o in run.outcomes if o.result and o.result.ttft_s]
    quarter = max(len(by_arrival) // 4, 1)
    return {
        "completed": len(e2e),
        "requests": requests,
        "calls_mean_s": calls_s,
        # E2E less the calls: queueing, decoding and KV handling
        "beyond_calls_mean_s": float(np.mean(e2e)) - calls_s,
        # last quarter's mean TTFT over the first quarter's (by arrival): >> 1 when
        # the queue grows through the run (arrivals beyond what the engine serves)
        "ttft_growth": float(np.mean(by_arrival[-quarter:]))
        / max(float(np.mean(by_arrival[:quarter])), 1e-9),
        "e2e_mean_s": float(np.mean(e2e)),
        "e2e_p99_s": float(np.percentile(e2e, 99)),
        "ttft_mean_s": float(np.mean(ttft)),
        "ttft_p99_s": float(np.percentile(ttft, 99)),
        "throughput_rps": len(e2e) / run.makespan_s,
        "kv_stalls": run.service._state.counters["kv_stalls"],
        "recomputed_tokens": run.engine.recomputed_tokens,
        "decided": run.counts,
    }


API_KV_TOKENS = 6144  # device KV of the API study: a few replies' contexts, the longest one


API_BATCH = 8  # the API study's batch cap (run_api_mix's default)
# memory-bound: half the device KV and a batch cap of 64, above what that KV holds at
# once in this mix, so memory bounds the batch (vLLM, as LAMPS ran it, caps at 256)
MEMORY_BOUND_KV_TOKENS, MEMORY_BOUND_BATCH = API_KV_TOKENS // 2, 64
MEMORY_BOUND_RATES = (2.0, 4.0, 8.0)


def api_study(
    console: Console,
    rates: tuple[float, ...],
    requests: int,
    kv_tokens: int = API_KV_TOKENS,
    max_batch_size: int = API_BATCH,
) -> dict[str, Any]:
    rows = {
        f"{rate:g}": {
            p: _api_run(rate, requests, p, kv_tokens=kv_tokens, max_batch_size=max_batch_size)
            for p in API_POLICIES
        }
        for rate in rates
    }
    table = Table(
        title=f"API mix (LAMPS Table 2 classes), {requests} requests per rate, "
        f"device KV {kv_tokens} tokens, batch cap {max_batch_size}"
    )
    for column in (
        "rate /s",
        "policy",
        "E2E mean s",
        "E2E p99 s",
        "E2E - calls s",
        "TTFT mean s",
        "TTFT p99 s",
        "req/s",
        "KV stalls",
        "recomputed",
    ):
        table.add_column(column)
    for rate, by_policy in rows.items():
        for policy, r in by_policy.items():
            table.add_row(
                rate,
                policy,
                f"{r['e2e_mean_s']:.1f}",
                f"{r['e2e_p99_s']:.1f}",
                f"{r['beyond_calls_mean_s']:.1f}",
                f"{r['ttft_mean_s']:.3f}",
                f"{r['ttft_p99_s']:.3f}",
                f"{r['throughput_rps']:.3f}",
                str(r["kv_stalls"]),
                str(r["recomputed_tokens"]),
            )
    console.print(table)
    top = rows[f"{max(rates):g}"]
    e2e_gain = 1 - top["lamps"]["e2e_mean_s"] / top["infercept"]["e2e_mean_s"]
    beyond = top["infercept"]["beyond_calls_mean_s"]
    goals = {
        "lamps_e2e_gain_vs_infercept_at_top_rate": e2e_gain,
        # the same gain on E2E less the calls' time (which no scheduler shortens)
        "lamps_beyond_calls_gain_vs_infercept_at_top_rate": 1
        - top["lamps"]["beyond_calls_mean_s"] / beyond
        if beyond > 0
        else 0.0,
        "lamps_e2e_27pct_below_infercept_at_top_rate": e2e_gain >= 0.27,
        "lamps_ttft_lower_at_every_rate": all(
            r["lamps"]["ttft_mean_s"] < r["infercept"]["ttft_mean_s"] for r in rows.values()
        ),
    }
    console.print(f"goals: {goals}")
    return {
        "rates": list(rates),
        "requests": requests,
        "kv_tokens": kv_tokens,
        "max_batch_size": max_batch_size,
        "runs": rows,
        "goals": goals,
    }


SWEEP_RATES = (1.0, 1.5, 2.0, 3.0, 4.0, 8.0, 12.0)
# (device KV tokens, batch cap): the API study's, half its KV, memory-bound
SWEEP_CONFIGS = (
    (API_KV_TOKENS, API_BATCH),
    (API_KV_TOKENS // 2, API_BATCH),
    (MEMORY_BOUND_KV_TOKENS, MEMORY_BOUND_BATCH),
)


def sweep_study(console: Console, requests: int) -> dict[str, Any]:
    """Where infercept's E2E starts to include queueing: infercept at rising rates,
    at the API study's device KV and batch cap, at half its KV, and memory-bound,
    with the calls' share of E2E."""
    rows = {
        f"{kv} / {batch}": {
            f"{rate:g}": _api_run(rate, requests, "infercept", kv_tokens=kv, max_batch_size=batch)
            for rate in SWEEP_RATES
        }
        for kv, batch in SWEEP_CONFIGS
    }
    table = Table(title=f"infercept, rate sweep, {requests} requests per rate")
    for column in (
        "KV / batch cap",
        "rate /s",
        "calls s",
        "E2E mean s",
        "E2E - calls s",
        "TTFT mean s",
        "TTFT growth",
        "KV stalls",
    ):
        table.add_column(column)
    for kv, by_rate in rows.items():
        for rate, r in by_rate.items():
            table.add_row(
                kv,
                rate,
                f"{r['calls_mean_s']:.1f}",
                f"{r['e2e_mean_s']:.1f}",
                f"{r['beyond_calls_mean_s']:.1f}",
                f"{r['ttft_mean_s']:.3f}",
                f"{r['ttft_growth']:.1f}",
                str(r["kv_stalls"]),
            )
    console.print(table)
    return {"rates": list(SWEEP_RATES), "requests": requests, "policy": "infercept", "runs": rows}


def mispredict_study(
    console: Console, rate: float, requests: int, infercept_e2e_s: float
) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for error in (0.0, 0.05, 0.1, 0.25, 0.5):
        r = _api_run(rate, requests, "lamps", _noise(error, seed=5) if error else None)
        r["gain_vs_infercept"] = 1 - r["e2e_mean_s"] / infercept_e2e_s
        rows[f"{error:g}"] = r
    table = Table(
        title=f"misprediction: lamps at {rate:g} req/s, Gaussian error on each predicted wait"
    )
    for column in ("error (std)", "E2E mean s", "gain vs infercept", "TTFT mean s"):
        table.add_column(column)
    for label, r in rows.items():
        table.add_row(
            f"{float(label):.0%}",
            f"{r['e2e_mean_s']:.1f}",
            f"{r['gain_vs_infercept']:.1%}",
            f"{r['ttft_mean_s']:.3f}",
        )
    console.print(table)
    return {"rate": rate, "infercept_e2e_mean_s": infercept_e2e_s, "errors": rows}


def _noise(error: float, seed: int) -> Callable[[float], float]:
    """Each predicted wait times (1 + error x a standard normal draw)."""
    rng = np.random.default_rng(seed)
    return lambda wait_s: wait_s * (1 + error * float(rng.standard_normal()))


def cost_study(console: Console, queued: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    table = QueueTable()
    for gen_id in range(queued):
        arrival = float(rng.uniform(0, 10))
        table.add(
            QueueEntry(
                gen_id=gen_id,
                seq=gen_id,
                ref_s=arrival,
                ert_s=float(rng.choice([0.5, 2])),
                slope=-0.2,
                initial_utility=float(rng.choice([1.0, 2.0])),
                segment_generation_s=0.05,
                arrival_s=arrival,
                initial_deadline_s=arrival + 2,
                ready_s=float(rng.uniform(0, 12)),
                memory_time=float(rng.uniform(1e6, 1e9)),
            )
        )
    timings = {}
    for name in ("lamps", "timely"):
        policy = make_policy(name)
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            policy.order(table, 11.0)
            samples.append(time.perf_counter() - started)
        timings[name] = statistics.median(samples)
    console.print(
        f"ranking {queued} queued (median of {repeats}): lamps {timings['lamps'] * 1e3:.3f} ms, "
        f"timely (Eq. 4, same table) {timings['timely'] * 1e3:.3f} ms; goal <= 0.2 ms"
    )
    return {
        "queued": queued,
        "repeats": repeats,
        "median_s": timings,
        "goal_met": timings["lamps"] <= GOAL_COST_S,
    }


def plot(api: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = api["rates"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for policy in API_POLICIES:
        runs = [api["runs"][f"{r:g}"][policy] for r in rates]
        axes[0].plot(rates, [x["e2e_mean_s"] for x in runs], marker="o", label=policy)
        axes[1].plot(rates, [x["e2e_p99_s"] for x in runs], marker="o", label=policy)
        axes[2].plot(rates, [x["ttft_mean_s"] for x in runs], marker="o", label=policy)
    for ax, title in zip(axes, ("mean E2E (s)", "p99 E2E (s)", "mean TTFT (s)"), strict=True):
        ax.set_xlabel("request rate (/s)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("API mix (LAMPS Table 2 classes), simulator")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    parser.add_argument(
        "--fleet-only", action="store_true", help="the memory-bound fleet only (lamps_fleet.json)"
    )
    parser.add_argument(
        "--no-sweep", action="store_true", help="without the infercept rate sweep (study 2b)"
    )
    args = parser.parse_args()
    console = Console()
    quick = args.quick
    started = time.perf_counter()
    fleet = fleet_study(console, robots=15 if quick else 45, duration_s=30 if quick else 120)
    if args.fleet_only:
        name = "lamps_fleet_quick" if quick else "lamps_fleet"
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / f"{name}.json"
        doc = {
            "bench": "lamps --fleet-only",
            "simulated": True,
            "machine": {"platform": platform.platform(), "python": platform.python_version()},
            "wall_s": time.perf_counter() - started,
            "fleet": fleet,
        }
        out.write_text(json.dumps(doc, indent=2, default=_plain) + "\n")
        console.print(f"results: {out}")
        return
    rates = (1.0, 2.0, 4.0)
    requests = 30 if quick else 200
    api = api_study(console, rates, requests)
    sweep = None if args.no_sweep else sweep_study(console, requests)
    memory_bound = api_study(
        console, MEMORY_BOUND_RATES, requests, MEMORY_BOUND_KV_TOKENS, MEMORY_BOUND_BATCH
    )
    mid = rates[1]
    mispredict = mispredict_study(
        console, mid, requests, api["runs"][f"{mid:g}"]["infercept"]["e2e_mean_s"]
    )
    cost = cost_study(console, 1000, 200 if quick else 2000)
    doc = {
        "bench": "lamps",
        "simulated": True,
        "note": "SIMULATION: virtual time on the paper's Llama3-8B / RTX 4090 latency profile",
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "wall_s": time.perf_counter() - started,
        "fleet": fleet,
        "api": api,
        "sweep": sweep,
        "api_memory_bound": memory_bound,
        "mispredict": mispredict,
        "cost": cost,
    }
    name = "lamps_quick" if quick else "lamps"
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(doc, indent=2, default=_plain) + "\n")
    plot(api, RESULTS / f"{name}_api.png")
    console.print(f"results: {out}, plot: {RESULTS / f'{name}_api.png'}")


def _plain(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


if __name__ == "__main__":
    main()
