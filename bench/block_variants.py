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

Timed three times: the drone's prompts (its ~1,900-token prefix and a request)
with private KV (prefix caching off: every row prefills and attends over its own
blocks) and with the prefix cache on (the prefix computed once per variant; a
single-variant batch then attends over it as shared blocks; prefill figures then
mostly count cache hits), and 64-token prompts with private KV (cheap attention:
what the variants' weights add shows most).

    PYTHONPATH=. .venv/bin/python bench/block_variants.py [--batch 8] [--rounds 10]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord, decode_step_times

RESULTS = Path(__file__).resolve().parent / "results" / "block_variants.json"
KV = EngineConfig(device_kv_bytes=2**27, host_kv_bytes=0, max_generations=64)
LORAS = ("warehouse-drone", "heavy-drone", "packing-arm")
FULL = "warehouse-drone-full"


def _rss() -> int:
    """Resident set size of this process in bytes (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _without_eos(root: Path) -> Path:
    """A copy of the planner that names no EOS token: its plans are short, and timed
    batches must stay whole for `--steps` decodes (the weights are the planner's)."""
    folder = root / "planner-no-eos"
    shutil.copytree(default_planner_path(), folder)
    for name in ("config.json", "generation_config.json"):
        raw = json.loads((folder / name).read_text())
        raw["eos_token_id"] = None
        (folder / name).write_text(json.dumps(raw))
    return folder


def _fleet_engine(base: Path, prefix_caching: bool) -> TorchEngine:
    variants = default_planner_path().parent / "variants"
    config = KV.model_copy(update={"enable_prefix_caching": prefix_caching})
    engine = TorchEngine(base, config)
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


REQUESTS = (  # drone requests
    ("visible: door, lamp", "Fly forward 450 cm, then turn left 90 degrees"),
    ("visible: door, rack", "Can you find my wallet?"),
    ("visible: window, shelf", "Go up 80 cm, fly a square of 100 cm, then land"),
    ("visible: box, chair", "Check whether the box is on the chair, then come back"),
)


def _prompts() -> list[list[int]]:
    """The drone's prompt (its prefix and a request) for each request."""
    from robot_models.prompts import format_request, prompt_prefix
    from timely_core.engine.torch.loader import load_tokenizer

    tokenizer = load_tokenizer(default_planner_path())
    prefix = tokenizer.encode(prompt_prefix("drone")).ids
    return [prefix + tokenizer.encode(format_request(*r)).ids for r in REQUESTS]


def _round(
    engine: TorchEngine,
    variants: list[str | None],
    prompts: list[list[int]],
    steps: int,
    first_id: int,
) -> tuple[float, list[float]]:
    """Seconds of the batch's prefill (the iterations until every generation has its
    first token), and of each of up to `steps` decode iterations of the whole batch
    (the planner copy has no EOS: every generation runs them all)."""
    ids = []
    for i, variant in enumerate(variants):
        params = SamplingParams(max_tokens=steps + 1)
        engine.add(first_id + i, prompts[i % len(prompts)], params, variant=variant)
        ids.append(first_id + i)
    started = time.perf_counter()
    first: set[int] = set()
    finished: set[int] = set()
    while len(first) < len(ids) and not finished:
        outputs = engine.step(ids)
        first |= {o.gen_id for o in outputs}
        finished = {o.gen_id for o in outputs if o.finished}
    prefill = time.perf_counter() - started
    return prefill, decode_step_times(engine, ids, steps, finished)


def _short_prompts(count: int, length: int = 64) -> list[list[int]]:
    """Prompts of `length` ids, one per row: attention over a short context costs
    little, so what the variants' own weights add shows most."""
    return [[(7 * i + j) % 1400 + 10 for j in range(length)] for i in range(count)]


def mixed_cost(
    base: Path,
    batch: int,
    steps: int,
    rounds: int,
    prefix_caching: bool,
    prompts: list[list[int]],
) -> dict[str, Any]:
    """Per-token cost of each layout. With prefix caching the drone's prefix is
    computed once per variant and decodes attend over it as shared blocks when the
    whole batch holds the same ones (one variant), which a mixed batch cannot."""
    engine = _fleet_engine(base, prefix_caching)
    third = max(1, batch // 3)
    loras: list[str | None] = [LORAS[i % len(LORAS)] for i in range(third)]
    rest: list[str | None] = [None] * (batch - 2 * third)
    layouts: dict[str, list[str | None]] = {
        "base": [None] * batch,
        "lora": [LORAS[0]] * batch,
        "blocks": [FULL] * batch,
        # the mixed batch with its full fine-tune rows on the base: what the blocks add
        "mixed_no_blocks": [None] * third + loras + rest,
        "mixed": [FULL] * third + loras + rest,
    }
    prefill: dict[str, list[float]] = {k: [] for k in layouts}
    decode: dict[str, list[float]] = {k: [] for k in layouts}
    gen_id = 0
    for _ in range(rounds):  # alternate so load changes hit every layout alike
        for key, variants in layouts.items():
            p, d = _round(engine, variants, prompts, steps, gen_id)
            prefill[key].append(p)
            decode[key] += d
            gen_id += batch
    prefill_ms = {k: 1e3 * statistics.median(v) for k, v in prefill.items()}
    prefill_tokens = sum(len(prompts[i % len(prompts)]) for i in range(batch))
    decode_ms = {k: 1e3 * statistics.median(v) for k, v in decode.items()}
    return {
        "prefix_caching": prefix_caching,
        "batch": batch,
        "prompt_tokens": [len(p) for p in prompts],
        "rounds": rounds,
        "timed_decode_iterations": {k: len(v) for k, v in decode.items()},
        "layouts": {k: [v or "base" for v in vs] for k, vs in layouts.items()},
        "median_prefill_ms": prefill_ms,
        "median_decode_ms": decode_ms,
        "decode_us_per_token": {k: 1e3 * v / batch for k, v in decode_ms.items()},
        "prefill_us_per_token": {k: 1e3 * v / prefill_tokens for k, v in prefill_ms.items()},
        "mixed_decode_vs": {k: decode_ms["mixed"] / v for k, v in decode_ms.items()},
        "mixed_prefill_vs": {k: prefill_ms["mixed"] / v for k, v in prefill_ms.items()},
    }


def _print(result: dict[str, Any]) -> None:
    console = Console()
    mem = result["memory"]
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
    for key, title in (
        ("private_kv", "drone prompts, private KV"),
        ("cached_prefix", "drone prompts, prefix cache on"),
        ("short_private_kv", "64-token prompts, private KV"),
    ):
        cost = result[key]
        steps = Table(title=f"batch of {cost['batch']}, {title} (medians of the same run)")
        for column in ("layout", "prefill us/token", "decode us/token", "mixed decode vs it"):
            steps.add_column(column, justify="right")
        for layout in cost["median_decode_ms"]:
            steps.add_row(
                layout,
                f"{cost['prefill_us_per_token'][layout]:.2f}",
                f"{cost['decode_us_per_token'][layout]:.0f}",
                f"{cost['mixed_decode_vs'][layout]:.2f}",
            )
        console.print(steps)
    console.print(MachineRecord.line(result["machine"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    machine = MachineRecord()
    mem = memory()
    with tempfile.TemporaryDirectory() as tmp:
        base = _without_eos(Path(tmp))
        drone, short = _prompts(), _short_prompts(args.batch)
        runs = (args.batch, args.steps, args.rounds)
        private = mixed_cost(base, *runs, prefix_caching=False, prompts=drone)
        cached = mixed_cost(base, *runs, prefix_caching=True, prompts=drone)
        short_private = mixed_cost(base, *runs, prefix_caching=False, prompts=short)
    result = {
        "machine": machine.done(),
        "memory": mem,
        "private_kv": private,
        "cached_prefix": cached,
        "short_private_kv": short_private,
    }
    _print(result)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    Console().print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
