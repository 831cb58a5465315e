"""Burst prefill: the prefill cascade vs attending each prompt on its own, same run.

An LRTrace event starts up to 8 (WID 1, 3) or 16 (WID 2) tasks at once, so the
engine prefills a burst of one robot's requests after that robot's registered
prefix. This times one engine iteration that prefills such a burst, to the first
token of every request, with the cascade (`timely_core.engine.torch.model.prefill_cascade`)
and without it (the same engine, the runner's cascade switched off), alternating
the two so that load drift hits both alike; it checks both give the same first
tokens. Real planner prompts (the LRTrace tasks' requests after the robot prefix).

    PYTHONPATH=. .venv/bin/python bench/prefill_cascade.py [--threads 1] [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT = ROOT / "robot_models" / "checkpoints" / "planner"
RESULTS = ROOT / "bench" / "results" / "prefill_cascade.json"
BURSTS = (1, 2, 4, 8, 16)


def robot_prompts() -> dict[str, tuple[list[int], list[list[int]]]]:
    """Per robot type: the prefix ids and the LRTrace requests' ids after it."""
    from robot_models.dataset import LRTRACE_TASKS
    from robot_models.language import load_language
    from timely_core.engine.torch.loader import load_tokenizer

    tokenizer = load_tokenizer(CHECKPOINT)

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    out: dict[str, tuple[list[int], list[list[int]]]] = {}
    for robot in ("drone", "arm"):
        language = load_language(robot)
        requests = [
            encode(language.format_request(t.scene, t.instruction))
            for t in LRTRACE_TASKS
            if t.robot_type == robot
        ]
        out[robot] = (encode(language.prompt_prefix()), requests)
    return out


def burst_s(
    engine: TorchEngine, robot: str, prefix: list[int], requests: list[list[int]], size: int
) -> tuple[float, list[int]]:
    """Seconds of one iteration prefilling `size` requests; their first tokens."""
    ids = list(range(size))
    for i in ids:
        engine.add(i, prefix + requests[i % len(requests)], SamplingParams(max_tokens=4), robot)
    started = time.perf_counter()
    outputs = engine.step(ids)
    seconds = time.perf_counter() - started
    for i in ids:
        engine.abort(i)
    if len(outputs) != size:
        raise RuntimeError(f"burst of {size}: {len(outputs)} first tokens")
    return seconds, [o.token_id for o in outputs]


def measure(threads: int, repeats: int) -> dict[str, Any]:
    torch.set_num_threads(threads)
    engine = TorchEngine(
        CHECKPOINT,
        EngineConfig(num_threads=threads, device_kv_bytes=512 * 2**20, host_kv_bytes=0),
    )
    prompts = robot_prompts()
    for robot, (prefix, _) in prompts.items():
        engine.register_prefix(robot, prefix)
    rows: dict[str, Any] = {}
    for robot, (prefix, requests) in prompts.items():
        for size in BURSTS:
            times: dict[bool, list[float]] = {True: [], False: []}
            tokens: dict[bool, list[int]] = {}
            for rep in range(repeats + 2):  # two warm-up rounds
                for cascade in (True, False) if rep % 2 == 0 else (False, True):
                    engine.runner._cascade = cascade
                    seconds, tokens[cascade] = burst_s(engine, robot, prefix, requests, size)
                    if rep >= 2:
                        times[cascade].append(seconds)
            if tokens[True] != tokens[False]:
                raise RuntimeError(f"{robot} burst of {size}: first tokens differ: {tokens}")
            with_cascade, without = statistics.median(times[True]), statistics.median(times[False])
            rows[f"{robot}/{size}"] = {
                "robot": robot,
                "burst": size,
                "request_tokens_mean": statistics.mean(
                    len(requests[i % len(requests)]) for i in range(size)
                ),
                "prefix_tokens": len(prefix),
                "cascade_s": with_cascade,
                "one_by_one_s": without,
                "change_pct": 100 * (with_cascade / without - 1),
            }
    engine.runner._cascade = True
    return {
        "model": str(CHECKPOINT),
        "threads": threads,
        "repeats": repeats,
        "baseline": "the same engine attending each prompt on its own, same run, alternating",
        "bursts": rows,
    }


def print_table(console: Console, results: dict[str, Any]) -> None:
    table = Table(title="burst prefill to first token: cascade vs one by one (same run)")
    for column in ("robot", "burst", "cascade (ms)", "one by one (ms)", "change"):
        table.add_column(column)
    for row in results["bursts"].values():
        table.add_row(
            row["robot"],
            str(row["burst"]),
            f"{row['cascade_s'] * 1e3:.2f}",
            f"{row['one_by_one_s'] * 1e3:.2f}",
            f"{row['change_pct']:+.1f}%",
        )
    console.print(table)
    console.print(
        f"medians of {results['repeats']} runs each, {results['threads']} torch thread(s); "
        "shared machine: expect noise"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (LRTrace real: 1)")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    console = Console()
    if not (CHECKPOINT / "config.json").is_file():
        raise SystemExit(f"no planner checkpoint at {CHECKPOINT}")
    results = measure(args.threads, args.repeats)
    print_table(console, results)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
