"""Fleet variants in one torch engine (one run, the planner checkpoint on CPU):

1. Resident weight memory of N LoRA variants served by one engine (the base once,
   each variant its adapter's factors) vs one base model vs N separate engines
   (each a whole model: a merged fine-tune per variant), from the engine's own
   accounting (`resident_weights`) and the process's resident set growth while
   loading them.
2. Cost of batched adapters: decode iterations of a batch of B generations, all on
   the base, all on one variant, and mixed (each row another variant, base rows
   included), timed alternately in the same run; the overhead per token of the
   mixed batch is against the base batch and the single-variant batch. The mixed
   batch runs twice: grouped (one batched matmul over the adapters, as served) and
   with its deltas added adapter by adapter (model/lora_batch.py's other path).

Variants: the shipped ones (robot_models/checkpoints/variants: the LoRA adapters of
fleet.yaml, then the full fine-tunes, `*-full`, as block variants), padded with random
rank-8 peft adapters up to N only when fewer are shipped (the JSON counts them). The
mixed-batch timing uses the LoRA variants only. `--base` names the base checkpoint the
variants were trained on (default: the shipped planner).

    PYTHONPATH=. .venv/bin/python bench/fleet_variants.py [--variants 8] [--batch 8] [--base DIR]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from robot_models.checkpoints import default_planner_path
from robot_models.variants.lora import TARGET_MODULES
from robot_models.variants.spec import VARIANTS_DIR, load_fleet
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.model import lora_batch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord, decode_step_times

RESULTS = Path(__file__).resolve().parent / "results" / "fleet_variants.json"
KV = EngineConfig(device_kv_bytes=2**25, host_kv_bytes=0, max_generations=64)


def _rss() -> int:
    """Resident set size of this process in bytes (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def variant_adapters(
    count: int,
    root: Path,
    robot_type: str | None = None,
    base: Path | None = None,
    full_tunes: bool = False,
) -> dict[str, Path]:
    """The shipped LoRA variants (of `robot_type`, if given), then (if `full_tunes`)
    the shipped full fine-tunes, then random peft adapters (rank 8) up to `count`."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    found = {
        name: spec.adapter_dir
        for name, spec in load_fleet().items()
        if robot_type in (None, spec.robot_type)
    }
    if full_tunes:
        found |= {
            d.name: d for d in sorted(VARIANTS_DIR.glob("*-full")) if (d / "config.json").is_file()
        }
    adapters = dict(list(found.items())[:count])
    for i in range(count - len(adapters)):
        torch.manual_seed(i)
        model = AutoModelForCausalLM.from_pretrained(
            base or default_planner_path(), dtype=torch.float32
        )
        config = LoraConfig(r=8, lora_alpha=16, target_modules=list(TARGET_MODULES))
        peft_model = get_peft_model(model, config)
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(param, std=0.01)
        peft_model.save_pretrained(str(root / f"random-{i}"))
        adapters[f"random-{i}"] = root / f"random-{i}"
    return adapters


def memory(adapters: dict[str, Path], base: Path) -> dict[str, Any]:
    gc.collect()
    before = _rss()
    engine = TorchEngine(base, KV)
    one_engine = _rss() - before
    base_bytes = engine.resident_weights().base_bytes
    before_adapters = _rss()
    for name, path in adapters.items():
        engine.load_adapter(name, path)
    adapters_rss = _rss() - before_adapters
    weights = engine.resident_weights()
    fleet_bytes = weights.total_bytes
    others = []
    before_others = _rss()
    for _ in range(len(adapters) - 1):
        others.append(TorchEngine(base, KV))
    separate_rss = one_engine + _rss() - before_others
    n = len(adapters)
    return {
        "variants": n,
        "base_weight_bytes": base_bytes,
        "adapter_bytes": {v.name: v.nbytes for v in weights.variants},
        "variant_kinds": {v.name: v.kind for v in weights.variants},
        "random_padding": sum(1 for name in adapters if name.startswith("random-")),
        "one_engine_weight_bytes": fleet_bytes,
        "one_engine_vs_base": fleet_bytes / base_bytes,
        "separate_engines_weight_bytes": n * base_bytes,
        "separate_vs_one_engine": n * base_bytes / fleet_bytes,
        "rss_one_base_engine_bytes": one_engine,  # weights + its KV pool + allocator
        "rss_adapters_loaded_bytes": adapters_rss,
        "rss_separate_engines_bytes": separate_rss,
        "kv_pool_bytes_per_engine": KV.device_kv_bytes,
    }


def _decode_step_s(
    engine: TorchEngine, variants: list[str | None], steps: int, first_id: int
) -> list[float]:
    """Per-iteration seconds of up to `steps` decode iterations of one whole batch
    (the round ends at the first generation that ends: the planner may emit EOS)."""
    prompt = list(range(10, 74))
    ids = []
    for i, variant in enumerate(variants):
        engine.add(first_id + i, prompt, SamplingParams(max_tokens=steps + 2), variant=variant)
        ids.append(first_id + i)
    finished = {o.gen_id for o in engine.step(ids) if o.finished}  # the prefill
    return decode_step_times(engine, ids, steps, finished)


def overhead(
    adapters: dict[str, Path], batch: int, steps: int, rounds: int, base: Path
) -> dict[str, Any]:
    engine = TorchEngine(base, KV)
    for name, path in adapters.items():
        engine.load_adapter(name, path)
    names = list(adapters)
    mixed: list[str | None] = [([None, *names])[i % (len(names) + 1)] for i in range(batch)]
    layouts: dict[str, list[str | None]] = {
        "base": [None] * batch,
        "single_variant": [names[0]] * batch,
        "mixed": mixed,
        "mixed_per_adapter_loop": mixed,  # the same batch, deltas added adapter by adapter
    }
    samples: dict[str, list[float]] = {k: [] for k in layouts}
    gen_id = 0
    for _ in range(rounds):  # alternate so load changes hit all layouts alike
        for key, variants in layouts.items():
            loop = key == "mixed_per_adapter_loop"
            lora_batch.GROUPED_MIN_ADAPTERS = 10**9 if loop else 2
            samples[key] += _decode_step_s(engine, variants, steps, gen_id)
            gen_id += batch
    lora_batch.GROUPED_MIN_ADAPTERS = 2
    median = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "batch": batch,
        "steps_per_round": steps,
        "timed_iterations": {k: len(v) for k, v in samples.items()},
        "rounds": rounds,
        "layouts": {k: [v if v else "base" for v in vs] for k, vs in layouts.items()},
        "median_step_ms": {k: 1e3 * v for k, v in median.items()},
        "mixed_overhead_per_token_us_vs_base": 1e6 * (median["mixed"] - median["base"]) / batch,
        "mixed_overhead_per_token_us_vs_single_variant": 1e6
        * (median["mixed"] - median["single_variant"])
        / batch,
        "mixed_vs_base": median["mixed"] / median["base"],
        "mixed_vs_single_variant": median["mixed"] / median["single_variant"],
        "per_adapter_loop_vs_grouped": median["mixed_per_adapter_loop"] / median["mixed"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variants", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--base", type=Path, default=default_planner_path())
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    machine = MachineRecord()
    with tempfile.TemporaryDirectory() as tmp:
        adapters = variant_adapters(args.variants, Path(tmp), base=args.base, full_tunes=True)
        mem = memory(adapters, args.base)
        loras = {n: p for n, p in adapters.items() if (p / "adapter_config.json").is_file()}
        cost = overhead(loras, args.batch, args.steps, args.rounds, args.base)
    result: dict[str, Any] = {
        "base": str(args.base),
        "machine": machine.done(),
        "memory": mem,
        "mixed_batch": cost,
    }
    console = Console()
    table = Table(title=f"resident weights, {mem['variants']} variants of the planner")
    for column in ("setup", "weight bytes", "x one base", "process RSS growth"):
        table.add_column(column, justify="right")
    base = mem["base_weight_bytes"]
    table.add_row("one base model", f"{base:,}", "1.00", f"{mem['rss_one_base_engine_bytes']:,}")
    table.add_row(
        f"{mem['variants']} variants, one engine",
        f"{mem['one_engine_weight_bytes']:,}",
        f"{mem['one_engine_vs_base']:.3f}",
        f"+{mem['rss_adapters_loaded_bytes']:,} for the adapters",
    )
    for name, nbytes in mem["adapter_bytes"].items():
        table.add_row(
            f"  {name} ({mem['variant_kinds'][name]})", f"{nbytes:,}", f"{nbytes / base:.4f}", ""
        )
    table.add_row(
        f"{mem['variants']} separate engines",
        f"{mem['separate_engines_weight_bytes']:,}",
        f"{mem['separate_engines_weight_bytes'] / base:.2f}",
        f"{mem['rss_separate_engines_bytes']:,}",
    )
    console.print(table)
    steps = Table(title=f"decode iteration, batch {cost['batch']} (median of the same run)")
    for column in ("batch", "ms / iteration", "vs base"):
        steps.add_column(column, justify="right")
    for key, ms in cost["median_step_ms"].items():
        steps.add_row(key, f"{ms:.2f}", f"{ms / cost['median_step_ms']['base']:.2f}")
    console.print(steps)
    console.print(
        f"mixed-batch overhead per token: {cost['mixed_overhead_per_token_us_vs_base']:.0f} us vs "
        f"base, {cost['mixed_overhead_per_token_us_vs_single_variant']:.0f} us vs one variant"
    )
    console.print(MachineRecord.line(result["machine"]))
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
