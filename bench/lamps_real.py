"""LAMPS on the real torch engine: the API mix (LAMPS Table 2 classes, chat mode)
at three request rates, lamps vs infercept vs vllm-like, plus lamps with the KV
prefetch off; each run beside the simulator's figures for the same requests.

The real engine is the planner checkpoint on this machine's CPU, run by
lrtrace/api_mix_torch.py: every prefill, decode and KV copy is computed, the
tokens are the trace's (forced decoding, so replies, segments and calls are the
same as the simulator's), and the service's virtual clock moves by the measured
wall time of each engine call, so the calls' durations (tens of seconds for the
chatbot, image and TTS classes) pass without sleeping. The simulator runs the same
requests on the planner's measured CPU profile
(lrtrace/profiles/measured-torch-planner-cpu.json) with the same KV pools.

SCALED for a 2-core shared machine, so that one run takes ~10 minutes: each rate
serves `--requests` requests (default 30; bench/lamps.py: 200), and, since so few
requests on an engine that decodes in milliseconds never contend at
bench/lamps.py's rates (1, 2, 4 /s) and KV (6144 tokens), the rates are 4, 16 and
64 requests/s and device KV is 2048 tokens (the longest reply still fits). The
calls' durations are the table's, unscaled. With so few requests p99 is close to
the maximum.

    PYTHONPATH=. .venv/bin/python bench/lamps_real.py [--requests N] [--quick]
    PYTHONPATH=. .venv/bin/python bench/lamps_real.py --horizon-sweep  # simulator only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from lrtrace.api_mix import ApiRun, compose_api_mix, run_api_mix
from lrtrace.api_mix_torch import MeasuredTorchEngine
from lrtrace.profiles import load as load_profile
from lrtrace.replay.targets.common import planner_tokenizer
from robot_models.checkpoints import default_planner_path
from timely_core.clock import VirtualClock
from timely_core.engine.block_manager import DEFAULT_BLOCK_SIZE
from timely_core.engine.sim.engine import Script, SimulatedEngineConfig
from timely_core.engine.torch.config import EngineConfig
from timely_core.service_config import ServiceConfig
from timely_core.serving import kv_handling

RESULTS = Path(__file__).resolve().parent / "results"
RATES = (4.0, 16.0, 64.0)  # scaled up (module docstring)
# (row label, policy, prefetch): the three policies, and lamps without the prefetch
VARIANTS = (
    ("lamps", "lamps", True),
    ("lamps, no prefetch", "lamps", False),
    ("infercept", "infercept", True),
    ("vllm-like", "vllm-like", True),
)
KV_TOKENS = 2048  # device KV, scaled down from bench/lamps.py's 6144; host 4x
SEED = 11


def _summary(run: ApiRun, wall_s: float) -> dict[str, Any]:
    e2e, ttft = run.e2e_s(), run.ttft_s()
    engine = run.engine
    return {
        "completed": len(e2e),
        "requests": len(run.outcomes),
        "e2e_mean_s": float(np.mean(e2e)),
        "e2e_p99_s": float(np.percentile(e2e, 99)),
        "ttft_mean_s": float(np.mean(ttft)),
        "ttft_p99_s": float(np.percentile(ttft, 99)),
        "throughput_rps": len(e2e) / run.makespan_s,
        "kv_stalls": run.service._state.counters["kv_stalls"],
        "recomputed_tokens": engine.recomputed_tokens,
        "swapped_in_blocks": engine.blocks.swapped_in_blocks,
        "prefetch": engine.prefetch_counts(),
        "decided": run.counts,
        "iterations": run.service._state.counters["iterations"],
        "wall_s": wall_s,
    }


def _run(
    rate: float,
    requests: int,
    policy: str,
    prefetch: bool,
    real: bool,
    horizon_s: float | None = None,
) -> dict[str, Any]:
    tokenizer, _ = planner_tokenizer()
    eos = int(tokenizer.token_to_id("<eos>"))
    mix = compose_api_mix(rate, requests, seed=SEED)
    blocks = KV_TOKENS // DEFAULT_BLOCK_SIZE
    config = ServiceConfig(kv_prefetch=prefetch)
    profile = load_profile("measured-torch-planner-cpu")
    sim_config = SimulatedEngineConfig(
        eos_token_id=eos,
        device_blocks=blocks,
        host_blocks=4 * blocks,
        bytes_per_block=profile.kv_bytes_per_token * DEFAULT_BLOCK_SIZE,
    )
    factory = None
    if real:
        bytes_per_token = profile.kv_bytes_per_token  # the planner's (2 * 4 layers * 2 * 32 * 4)
        torch_config = EngineConfig(
            device_kv_bytes=KV_TOKENS * bytes_per_token,
            host_kv_bytes=4 * KV_TOKENS * bytes_per_token,
            num_threads=1,
        )

        def factory(clock: VirtualClock, script: Script) -> MeasuredTorchEngine:
            return MeasuredTorchEngine(default_planner_path(), torch_config, clock, script)

    started = time.perf_counter()
    with _horizon(horizon_s):
        run = run_api_mix(
            mix, policy, profile, sim_config, tokenizer, config=config, engine_factory=factory
        )
    summary = _summary(run, time.perf_counter() - started)
    if real:
        assert isinstance(run.engine, MeasuredTorchEngine)
        summary["engine_measured_s"] = run.engine.measured_s
        assert run.engine.blocks.num_device_blocks == blocks  # the same pool as the sim's
    return summary


@contextmanager
def _horizon(horizon_s: float | None) -> Iterator[None]:
    """Services built meanwhile prefetch with this horizon (None: the default)."""
    if horizon_s is None:
        yield
        return
    default = kv_handling.PREFETCH_HORIZON_S
    kv_handling.PREFETCH_HORIZON_S = horizon_s
    try:
        yield
    finally:
        kv_handling.PREFETCH_HORIZON_S = default


def horizon_study(console: Console, rates: tuple[float, ...], requests: int) -> dict[str, Any]:
    """lamps on the simulator, the prefetch's horizon swept (how PREFETCH_HORIZON_S
    was chosen), without prefetch as the baseline."""
    horizons: tuple[float | None, ...] = (math.inf, 5.0, 1.0, 0.2)
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for rate in rates:
        row = runs.setdefault(f"{rate:g}", {})
        row["no prefetch"] = _run(rate, requests, "lamps", False, False)
        for horizon in horizons:
            row[f"{horizon:g} s"] = _run(rate, requests, "lamps", True, False, horizon)
    table = Table(title=f"prefetch horizon, lamps, simulator, {requests} requests per rate")
    for column in ("rate /s", "horizon", "TTFT mean ms", "E2E mean s", "swapped in",
                   "prefetches", "hits", "given up"):  # fmt: skip
        table.add_column(column)
    for rate_key, by_horizon in runs.items():
        for horizon_key, r in by_horizon.items():
            p = r["prefetch"]
            table.add_row(
                rate_key,
                horizon_key,
                f"{1000 * r['ttft_mean_s']:.1f}",
                f"{r['e2e_mean_s']:.2f}",
                str(r["swapped_in_blocks"]),
                str(p["prefetches"]),
                str(p["prefetch_hits"]),
                str(p["prefetch_given_up"]),
            )
    console.print(table)
    return {"rates": list(rates), "requests": requests, "runs": runs}


def study(console: Console, rates: tuple[float, ...], requests: int) -> dict[str, Any]:
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for rate in rates:
        for label, policy, prefetch in VARIANTS:
            for engine in ("real", "sim"):
                key = f"{rate:g}"
                runs.setdefault(key, {}).setdefault(label, {})[engine] = _run(
                    rate, requests, policy, prefetch, engine == "real"
                )
            console.log(f"rate {rate:g} {label}: done")
    table = Table(
        title=f"API mix, real torch engine (planner, CPU) vs simulator (its CPU profile): "
        f"{requests} requests per rate (SCALED), device KV {KV_TOKENS} tokens"
    )
    for column in (
        "rate /s",
        "policy",
        "engine",
        "E2E mean s",
        "E2E p99 s",
        "TTFT mean s",
        "TTFT p99 s",
        "req/s",
        "KV stalls",
        "swapped in",
        "prefetch (hit/given up)",
        "recomputed",
        "wall s",
    ):
        table.add_column(column)
    for rate_key, by_label in runs.items():
        for label, by_engine in by_label.items():
            for engine, r in by_engine.items():
                p = r["prefetch"]
                table.add_row(
                    rate_key,
                    label,
                    engine,
                    f"{r['e2e_mean_s']:.2f}",
                    f"{r['e2e_p99_s']:.2f}",
                    f"{r['ttft_mean_s']:.4f}",
                    f"{r['ttft_p99_s']:.4f}",
                    f"{r['throughput_rps']:.3f}",
                    str(r["kv_stalls"]),
                    str(r["swapped_in_blocks"]),
                    f"{p['prefetches']} ({p['prefetch_hits']}/{p['prefetch_given_up']})",
                    str(r["recomputed_tokens"]),
                    f"{r['wall_s']:.0f}",
                )
    console.print(table)
    top = runs[f"{max(rates):g}"]
    goals: dict[str, Any] = {}
    for engine in ("real", "sim"):
        gain = 1 - top["lamps"][engine]["e2e_mean_s"] / top["infercept"][engine]["e2e_mean_s"]
        goals[engine] = {
            "lamps_e2e_gain_vs_infercept_at_top_rate": gain,
            "lamps_e2e_27pct_below_infercept_at_top_rate": gain >= 0.27,
            "lamps_ttft_lower_at_every_rate": all(
                r["lamps"][engine]["ttft_mean_s"] < r["infercept"][engine]["ttft_mean_s"]
                for r in runs.values()
            ),
        }
    console.print(f"goals: {goals}")
    return {"rates": list(rates), "requests": requests, "runs": runs, "goals": goals}


def _matmul_gflops() -> float:
    """This machine's single-thread fp32 matmul rate now (its load shows in it)."""
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    torch.set_num_threads(1)
    a @ b
    started = time.perf_counter()
    for _ in range(20):
        a @ b
    return 20 * 2 * 512**3 / (time.perf_counter() - started) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30, help="requests per rate")
    parser.add_argument("--quick", action="store_true", help="4 requests per rate, a smoke run")
    parser.add_argument(
        "--horizon-sweep",
        action="store_true",
        help="only the simulator's sweep of the prefetch horizon (lamps_prefetch_horizon.json)",
    )
    args = parser.parse_args()
    if args.requests < 2:
        parser.error(f"--requests must be at least 2, got {args.requests}")
    requests = 4 if args.quick else args.requests
    console = Console(width=200)
    if args.horizon_sweep:
        sweep = horizon_study(console, RATES, requests)
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / "lamps_prefetch_horizon.json"
        out.write_text(json.dumps({"bench": "lamps_real --horizon-sweep", **sweep}, indent=2,
                                  default=str) + "\n")  # fmt: skip
        console.print(f"results: {out}")
        return
    machine = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "load_avg_start": os.getloadavg(),
        "matmul_gflops_1thread_start": _matmul_gflops(),
    }
    console.print(f"machine: {machine}")
    started = time.perf_counter()
    api = study(console, RATES, requests)
    machine["load_avg_end"] = os.getloadavg()
    machine["matmul_gflops_1thread_end"] = _matmul_gflops()
    console.print(f"machine at the end: {machine}")
    doc = {
        "bench": "lamps_real",
        "scaled": f"{requests} requests per rate (bench/lamps.py: 200), rates {RATES} "
        f"(bench/lamps.py: 1, 2, 4), device KV {KV_TOKENS} tokens (bench/lamps.py: 6144); "
        "call durations unscaled, passing in virtual time",
        "note": "real: torch engine (planner checkpoint, CPU, 1 thread), forced to the "
        "trace's tokens, virtual clock moved by each engine call's measured wall time; "
        "sim: the same requests on measured-torch-planner-cpu",
        "machine": machine,
        "wall_s": time.perf_counter() - started,
        "api": api,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("lamps_real_quick.json" if args.quick else "lamps_real.json")
    out.write_text(json.dumps(doc, indent=2) + "\n")
    console.print(f"results: {out}")


if __name__ == "__main__":
    main()
