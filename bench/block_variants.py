"""A full fine-tune served as a block variant beside LoRA variants, in one torch engine
(one run, the planner checkpoint on CPU):

1. Resident weight memory of the base + the three shipped LoRA variants + the shipped
   full fine-tune (warehouse-drone-full, its differing blocks only) in one engine, vs
   one base model and vs separate engines (each variant a whole model), from the
   engine's own accounting (`resident_weights`) and the process's resident set growth
   while loading the fine-tune.
2. Cost of a mixed batch: prefill and decode iterations of a batch of B generations,
   all base, all one LoRA variant, all the full fine-tune, mixed (base, LoRA and
   block-variant rows together) and the same mix with the block-variant rows on the
   base (what serving the fine-tune's blocks adds), timed alternately in the same
   run; per token, and the mixed batch against each of the others.

Prefix caching is off so every layout attends over private blocks alike.

    PYTHONPATH=. .venv/bin/python bench/block_variants.py [--batch 8] [--rounds 10]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from robot_models.checkpoints import default_planner_path
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

RESULTS = Path(__file__).resolve().parent / "results" / "block_variants.json"
KV = EngineConfig(
    device_kv_bytes=2**25, host_kv_bytes=0, max_generations=64, enable_prefix_caching=False
)
LORAS = ("warehouse-drone", "heavy-drone", "packing-arm")
FULL = "warehouse-drone-full"
PROMPT_TOKENS = 64


def _rss() -> int:
    """Resident set size of this process in bytes (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _matmul_gflops(size: int = 1024, repeats: int = 5) -> float:
    """Best float32 GFLOP/s of a square matmul on the current thread count."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best / 1e9


def _fleet_engine() -> TorchEngine:
    variants = default_planner_path().parent / "variants"
    engine = TorchEngine(default_planner_path(), KV)
    for name in (*LORAS, FULL):
        engine.load_adapter(name, variants / name)
    return engine


def memory() -> dict[str, Any]:
    variants = default_planner_path().parent / "variants"
    gc.collect()
    engine = TorchEngine(default_planner_path(), KV)
    base = engine.resident_weights().base_bytes
    for name in LORAS:
        engine.load_adapter(name, variants / name)
    gc.collect()
    before = _rss()
    engine.load_adapter(FULL, variants / FULL)
    gc.collect()
    full_rss = _rss() - before
    weights = engine.resident_weights()
    own = {v.name: v.nbytes for v in weights.variants}
    separate = (1 + len(weights.variants)) * base  # the base and each variant whole
    return {
        "variants": weights.names(),
        "kinds": {v.name: v.kind for v in weights.variants},
        "full_finetune_blocks": list(weights.variants[-1].blocks),
        "base_weight_bytes": base,
        "variant_bytes": own,
        "one_engine_weight_bytes": weights.total_bytes,
        "one_engine_vs_base": weights.total_bytes / base,
        "separate_engines_weight_bytes": separate,
        "separate_vs_one_engine": separate / weights.total_bytes,
        "full_finetune_vs_whole_model": own[FULL] / base,
        "rss_growth_loading_full_finetune_bytes": full_rss,
    }


def _prompt(seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(10, 1500) for _ in range(PROMPT_TOKENS)]


def _round(
    engine: TorchEngine, variants: list[str | None], steps: int, first_id: int
) -> tuple[float, list[float]]:
    """Seconds of the batch's prefill iteration, and of each of up to `steps` decode
    iterations of the whole batch (the round ends at the first generation that ends)."""
    ids = []
    for i, variant in enumerate(variants):
        params = SamplingParams(max_tokens=steps + 2)
        engine.add(first_id + i, _prompt(first_id + i), params, variant=variant)
        ids.append(first_id + i)
    started = time.perf_counter()
    finished = {o.gen_id for o in engine.step(ids) if o.finished}
    prefill = time.perf_counter() - started
    times: list[float] = []
    while not finished and len(times) < steps:
        started = time.perf_counter()
        outputs = engine.step(ids)
        times.append(time.perf_counter() - started)
        finished = {o.gen_id for o in outputs if o.finished}
    for gen_id in ids:
        if gen_id not in finished:
            engine.abort(gen_id)
    return prefill, times


def mixed_cost(batch: int, steps: int, rounds: int) -> dict[str, Any]:
    engine = _fleet_engine()
    third = max(1, batch // 3)
    loras: list[str | None] = [LORAS[i % len(LORAS)] for i in range(third)]
    mixed: list[str | None] = [FULL] * third + loras + [None] * (batch - 2 * third)
    layouts: dict[str, list[str | None]] = {
        "base": [None] * batch,
        "lora": [LORAS[0]] * batch,
        "blocks": [FULL] * batch,
        # the mixed batch with its full fine-tune rows on the base: what the blocks add
        "mixed_no_blocks": [None] * third + loras + [None] * (batch - 2 * third),
        "mixed": mixed,
    }
    prefill: dict[str, list[float]] = {k: [] for k in layouts}
    decode: dict[str, list[float]] = {k: [] for k in layouts}
    gen_id = 0
    for _ in range(rounds):  # alternate so load changes hit every layout alike
        for key, variants in layouts.items():
            p, d = _round(engine, variants, steps, gen_id)
            prefill[key].append(p)
            decode[key] += d
            gen_id += batch
    prefill_ms = {k: 1e3 * statistics.median(v) for k, v in prefill.items()}
    decode_ms = {k: 1e3 * statistics.median(v) for k, v in decode.items()}
    return {
        "batch": batch,
        "prompt_tokens": PROMPT_TOKENS,
        "rounds": rounds,
        "timed_decode_iterations": {k: len(v) for k, v in decode.items()},
        "layouts": {k: [v or "base" for v in vs] for k, vs in layouts.items()},
        "median_prefill_ms": prefill_ms,
        "median_decode_ms": decode_ms,
        "decode_us_per_token": {k: 1e3 * v / batch for k, v in decode_ms.items()},
        "prefill_us_per_token": {
            k: 1e3 * v / (batch * PROMPT_TOKENS) for k, v in prefill_ms.items()
        },
        "mixed_decode_vs": {k: decode_ms["mixed"] / v for k, v in decode_ms.items()},
        "mixed_prefill_vs": {k: prefill_ms["mixed"] / v for k, v in prefill_ms.items()},
    }


def _print(result: dict[str, Any]) -> None:
    console = Console()
    mem, cost = result["memory"], result["mixed_batch"]
    table = Table(title="resident weights: base + 3 LoRA + the full fine-tune")
    for column in ("setup", "weight bytes", "x one base"):
        table.add_column(column, justify="right")
    base = mem["base_weight_bytes"]
    table.add_row("one base model", f"{base:,}", "1.00")
    for name, nbytes in mem["variant_bytes"].items():
        table.add_row(f"+ {name} ({mem['kinds'][name]})", f"{nbytes:,}", f"{nbytes / base:.3f}")
    table.add_row(
        "one engine, all", f"{mem['one_engine_weight_bytes']:,}", f"{mem['one_engine_vs_base']:.3f}"
    )
    table.add_row(
        f"{len(mem['variants']) + 1} separate engines",
        f"{mem['separate_engines_weight_bytes']:,}",
        f"{mem['separate_engines_weight_bytes'] / base:.2f}",
    )
    console.print(table)
    steps = Table(title=f"batch of {cost['batch']} (medians of the same run)")
    for column in ("layout", "prefill us/token", "decode us/token", "mixed decode vs it"):
        steps.add_column(column, justify="right")
    for key in cost["median_decode_ms"]:
        steps.add_row(
            key,
            f"{cost['prefill_us_per_token'][key]:.1f}",
            f"{cost['decode_us_per_token'][key]:.0f}",
            f"{cost['mixed_decode_vs'][key]:.2f}",
        )
    console.print(steps)
    machine = result["machine"]
    console.print(
        f"load {machine['load_before']:.1f} -> {machine['load_after']:.1f} on "
        f"{machine['cores']} cores; matmul {machine['matmul_gflops_1_thread']:.0f} GFLOP/s "
        "(1 thread)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    peak = _matmul_gflops()
    mem = memory()
    cost = mixed_cost(args.batch, args.steps, args.rounds)
    result = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch_threads": 1,
            "matmul_gflops_1_thread": peak,
            "load_before": load_before,
            "load_after": os.getloadavg()[0],
        },
        "memory": mem,
        "mixed_batch": cost,
    }
    _print(result)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    Console().print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
