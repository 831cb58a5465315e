"""Decode iterations of robots with different prompt prefixes in one batch (one run,
the planner checkpoint on CPU, one thread): drones beside arms, and drones of 8 fleet
variants (a LoRA changes a prefix's KV, so each variant holds its own copy).

Each layout is timed two ways in alternating rounds: as served, one attention part
per prefix (each prefix's blocks read once for all its generations), and as one
group (the baseline: without a prefix common to every generation, each
generation's whole context is gathered). A batch of one prefix is timed for
reference.

    PYTHONPATH=. .venv/bin/python bench/mixed_prefix_decode.py [--batch 32]
"""

from __future__ import annotations

import argparse
import json
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
from robot_models.dataset import LRTRACE_TASKS
from robot_models.language import load_language
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.loader import load_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord
from fleet_variants import variant_adapters

RESULTS = Path(__file__).resolve().parent / "results" / "mixed_prefix_decode.json"
KV = EngineConfig(device_kv_bytes=2**27, host_kv_bytes=0, num_threads=1, max_generations=64)


def robot_prompts() -> dict[str, tuple[list[int], list[list[int]]]]:
    """Per robot type: its prefix and its LRTrace tasks' prompts."""
    tokenizer = load_tokenizer(default_planner_path())

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    out = {}
    for robot in ("drone", "arm"):
        language = load_language(robot)
        prefix = encode(language.prompt_prefix())
        prompts = [
            prefix + encode(language.format_request(t.scene, t.instruction))
            for t in LRTRACE_TASKS
            if t.robot_type == robot
        ]
        out[robot] = (prefix, prompts)
    return out


def step_times(
    engine: TorchEngine,
    rows: list[tuple[str, str | None]],
    prompts: dict[str, tuple[list[int], list[list[int]]]],
    steps: int,
    first_id: int,
    one_group: bool,
) -> list[float]:
    """Decode iterations of a batch whose row i is (robot, variant); the prompts'
    prefixes registered per (robot, variant) beforehand."""
    ids = []
    for i, (robot, variant) in enumerate(rows):
        _, robot_prompts_ = prompts[robot]
        prompt = robot_prompts_[i % len(robot_prompts_)]
        params = SamplingParams(max_tokens=steps + 2)
        engine.add(first_id + i, prompt, params, f"{robot}@{variant}", variant=variant)
        ids.append(first_id + i)
    live = list(ids)
    for out in engine.step(live):  # prefills
        if out.finished:
            live.remove(out.gen_id)
    runner = engine.runner
    served = runner._decode_group
    if one_group:  # the baseline: every decode in one attention group
        runner._decode_group = runner._decode_part  # type: ignore[method-assign]
    times: list[float] = []
    try:
        while live and len(times) < steps:
            started = time.perf_counter()
            outputs = engine.step(live)
            times.append(time.perf_counter() - started)
            for out in outputs:
                if out.finished:
                    live.remove(out.gen_id)
    finally:
        runner._decode_group = served  # type: ignore[method-assign]
    for gen_id in live:
        engine.abort(gen_id)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    machine = MachineRecord()
    prompts = robot_prompts()
    engine = TorchEngine(default_planner_path(), KV)
    with tempfile.TemporaryDirectory() as tmp:
        adapters = variant_adapters(8, Path(tmp), "drone")
        for name, path in adapters.items():
            engine.load_adapter(name, path)
    names = list(adapters)
    layouts: dict[str, list[tuple[str, str | None]]] = {
        "one prefix (drones)": [("drone", None)] * args.batch,
        "drones and arms": [(("drone", "arm")[i % 2], None) for i in range(args.batch)],
        "8 drone variants": [("drone", names[i % len(names)]) for i in range(args.batch)],
    }
    for rows in layouts.values():
        for robot, variant in set(rows):
            prefix = prompts[robot][0]
            engine.register_prefix(f"{robot}@{variant}", prefix, variant=variant)
    samples: dict[tuple[str, str], list[float]] = {}
    gen_id = 0
    for _ in range(args.rounds):  # alternate so load changes hit every layout alike
        for layout, rows in layouts.items():
            for way in ("parts", "one group"):
                if layout.startswith("one prefix") and way == "parts":
                    continue  # one prefix: a single group either way
                times = step_times(
                    engine, rows, prompts, args.steps, gen_id, one_group=way == "one group"
                )
                samples.setdefault((layout, way), []).extend(times)
                gen_id += len(rows)
    median_ms = {k: 1e3 * statistics.median(v) for k, v in samples.items()}
    result: dict[str, Any] = {
        "machine": machine.done(),
        "batch": args.batch,
        "timed_iterations": {f"{k[0]} / {k[1]}": len(v) for k, v in samples.items()},
        "median_step_ms": {f"{k[0]} / {k[1]}": v for k, v in median_ms.items()},
    }
    table = Table(title=f"decode iteration, batch {args.batch} (medians of the same run)")
    for column in ("layout", "attention", "ms / iteration", "one group / parts"):
        table.add_column(column, justify="right")
    for (layout, way), ms in median_ms.items():
        parts = median_ms.get((layout, "parts"))
        ratio = f"{median_ms[(layout, 'one group')] / parts:.2f}" if parts else ""
        table.add_row(layout, way, f"{ms:.1f}", ratio if way == "parts" else "")
    console = Console()
    console.print(table)
    console.print(MachineRecord.line(result["machine"]))
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
