"""The fleet's mixed traffic on vLLM's multi-LoRA against the torch engine (one run,
the planner on CPU, in process): the TUF trace of bench/fleet_traffic.py (drone tasks
arriving over time, urgency classes, drones tagged with 8 LoRA variants), served by
one engine with every adapter loaded, mixed batches, on each backend: the torch
engine (`TorchEngine`, adapters batched per Punica's SGMV idea) and vLLM
(`VllmEngine`, `enable_lora`, a `LoRARequest` per generation).

Both get the same KV bytes (vLLM's CPU build takes whole GiB: `--kv-gib`), one
thread, the same admission (urgent first, then arrival) and the same device clock
(measured engine calls; idle time skipped to the next arrival). Reported: tokens per
busy second, urgent and normal TUF utility, p95 response, and how many tasks' tokens
equal the torch engine's.

    PYTHONPATH=. .venv/bin/python bench/fleet_traffic_vllm.py [--eps 4] [--duration-s 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from robot_models.checkpoints import default_planner_path
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.engine import TorchEngine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord
from fleet_traffic import kv_config, tuf_table
from fleet_traffic_tuf import serve_variants, trace_requests, utility_summary
from fleet_variants import variant_adapters

RESULTS = Path(__file__).resolve().parent / "results" / "fleet_traffic_vllm.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variants", type=int, default=8)
    parser.add_argument("--eps", type=float, default=4.0, help="events per second")
    parser.add_argument("--duration-s", type=float, default=5.0, help="trace length")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--kv-gib", type=int, default=1, help="KV bytes for both engines")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    console = Console(width=160)
    machine = MachineRecord()
    planner = default_planner_path()
    params = SamplingParams(max_tokens=args.max_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        adapters = variant_adapters(args.variants, Path(tmp), "drone")
        types = dict.fromkeys(adapters, "drone")
        prefixes, requests = trace_requests(types, args.eps, args.duration_s, 0)
        torch_engine = TorchEngine(planner, kv_config(args.kv_gib * 2**30))
        for name, path in adapters.items():
            torch_engine.load_adapter(name, path)
        torch_clock = serve_variants(torch_engine, prefixes, requests, params)
        del torch_engine
        from timely_core.engine.vllm.config import VllmConfig
        from timely_core.engine.vllm.engine import VllmEngine

        config = VllmConfig(
            kv_cache_space_gib=args.kv_gib,
            max_num_seqs=64,
            num_threads=1,
            max_loras=len(adapters),
            max_lora_rank=8,
        )
        vllm_engine = VllmEngine(planner, config)
        try:
            for name, path in adapters.items():
                vllm_engine.load_adapter(name, path)
            vllm_clock = serve_variants(vllm_engine, prefixes, requests, params)
        finally:
            vllm_engine.close()
    contenders: dict[str, Any] = {
        "torch_one_engine": utility_summary(torch_clock, requests, None),
        "vllm_multi_lora": utility_summary(vllm_clock, requests, torch_clock),
    }
    result = {
        "machine": machine.done(),
        "variants": list(adapters),
        "events_per_s": args.eps,
        "duration_s": args.duration_s,
        "memory_bytes": args.kv_gib * 2**30,
        "tasks": len(requests),
        "urgent_tasks": sum(r.urgency == "urgent" for r in requests),
        "max_tokens": args.max_tokens,
        "contenders": contenders,
    }
    table = tuf_table(result)
    table.title = f"{table.title} (KV, not total)"
    console.print(table)
    same = contenders["vllm_multi_lora"]["tokens_equal_one_engine"]
    console.print(f"vLLM tasks whose tokens equal the torch engine's: {same}/{len(requests)}")
    console.print(MachineRecord.line(result["machine"]))
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
