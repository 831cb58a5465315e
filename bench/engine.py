"""The torch engine against Hugging Face transformers, measured in the same run.

What issue #4 asks for, each as a ratio to a baseline of this run:
- decode tokens/s at batch 1 vs HF `generate` (goal >= 2x);
- 32 requests of different robots, staggered arrivals, sharing their robot's
  registered prompt prefix, vs the best of HF one-by-one and HF static batches
  (goal >= 4x), and the same engine without prefix reuse;
- prefill throughput as a fraction of this machine's measured matmul peak (>= 40%);
- resume of a 1,000-token context from `swap` vs `discard` (swap-in <= 15% of the
  re-prefill);
- time to first token with the registered robot prefix vs a cold prefill (>= 80%
  lower);
- per-iteration CPU time outside the model forward.

It runs the planner checkpoint (`robot_models/checkpoints/planner`) with the real
robot prompts when it exists, else a random-weight Llama of the planner's shape
with random prompts of the same lengths (the JSON says which). The machine is
shared: expect noise; every time is the median of several repeats.

    PYTHONPATH=. .venv/bin/python bench/engine.py [--threads 2] [--repeats 3] [--model DIR]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from timely_core.engine.protocol import HandlingStrategy, SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT = ROOT / "robot_models" / "checkpoints" / "planner"
RESULTS = ROOT / "bench" / "results" / "engine.json"
NEW_TOKENS = 32
DECODE_ROUNDS = 9  # at least; rounds of batch-1 decode, engine vs HF
DECODE_PAIRS = 4  # alternating runs of each side per round
REQUESTS = 32
ARRIVAL_GAP_S = 0.05
STATIC_BATCH = 8


@dataclass(frozen=True)
class Workload:
    """Prefix and per-request tails, as token ids, for each robot."""

    model_path: Path
    source: str
    prefixes: dict[str, list[int]]
    tails: list[tuple[str, list[int]]]  # (robot, request ids), one per request

    def prompt(self, i: int) -> list[int]:
        robot, tail = self.tails[i % len(self.tails)]
        return self.prefixes[robot] + tail


def planner_workload(path: Path) -> Workload:
    from robot_models.dataset import LRTRACE_TASKS
    from robot_models.language import load_language
    from timely_core.engine.torch.loader import load_tokenizer

    tokenizer = load_tokenizer(path)

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    prefixes = {r: encode(load_language(r).prompt_prefix()) for r in ("drone", "arm")}
    tails = [
        (t.robot_type, encode(load_language(t.robot_type).format_request(t.scene, t.instruction)))
        for t in LRTRACE_TASKS
    ]
    return Workload(path, f"planner checkpoint {path}", prefixes, tails)


def stand_in_workload(folder: Path) -> Workload:
    """A random-weight Llama of the planner's shape (hidden 256, 4 layers, 8 heads,
    2 KV heads, vocab 2,048) and random prompts of planner-like lengths."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=2048,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=2,
        bos_token_id=2,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    rng = random.Random(0)
    prefixes = {r: [rng.randrange(3, 2048) for _ in range(1100)] for r in ("drone", "arm")}
    tails = [
        (("drone", "arm")[i % 2], [rng.randrange(3, 2048) for _ in range(rng.randrange(25, 60))])
        for i in range(11)
    ]
    return Workload(folder, "random-weight stand-in (planner checkpoint absent)", prefixes, tails)


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def matmul_peak(threads: int, repeats: int) -> float:
    """Best float32 GFLOP/s of a 2,048-square matmul on `threads` threads."""
    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    seconds = min(median_time(lambda: a @ b, 3) for _ in range(repeats))
    return 2 * 2048**3 / seconds / 1e9


def prefill_flops(engine: TorchEngine, tokens: int) -> float:
    """Useful FLOPs of a cold prefill: linear layers for every token, the LM head for
    the last one, causal attention (QK^T and PV)."""
    cfg, w = engine.model.config, engine.model.weights
    per_layer = sum(t.numel() for t in (w.layers[0].qkv, w.layers[0].o))
    per_layer += sum(t.numel() for t in (w.layers[0].gate_up, w.layers[0].down))
    linear = 2 * tokens * per_layer * cfg.num_hidden_layers + 2 * w.lm_head.numel()
    pairs = tokens * (tokens + 1) / 2
    attention = 4 * pairs * cfg.head_dim * cfg.num_attention_heads * cfg.num_hidden_layers
    return float(linear + attention)


# ---------------------------------------------------------------- engine side
def engine_for(
    work: Workload, threads: int, caching: bool = True, small_threads: int = 1
) -> TorchEngine:
    config = EngineConfig(
        num_threads=threads,
        small_step_threads=small_threads,
        max_batched_tokens=2048,
        max_generations=64,
        enable_prefix_caching=caching,
        device_kv_bytes=512 * 2**20,
        host_kv_bytes=256 * 2**20,
    )
    return TorchEngine(work.model_path, config)


def run_to_first_token(engine: TorchEngine, gen_id: int, prompt: list[int], **kw: Any) -> None:
    engine.add(gen_id, prompt, SamplingParams(max_tokens=NEW_TOKENS), **kw)
    while not engine.step([gen_id]):
        pass


def engine_decode(engine: TorchEngine, prompt: list[int]) -> tuple[float, list[int]]:
    """Seconds per decode step over the NEW_TOKENS steps after the first token (the
    steps `HfBaseline.decode` times), and every token generated."""
    engine.add(1000, prompt, SamplingParams(max_tokens=NEW_TOKENS + 1))
    while not (out := engine.step([1000])):
        pass
    tokens = [out[0].token_id]
    started = time.perf_counter()
    while not out[0].finished:
        out = engine.step([1000])
        tokens.append(out[0].token_id)
    return (time.perf_counter() - started) / max(1, len(tokens) - 1), tokens


def engine_staggered(engine: TorchEngine, work: Workload, reuse_prefix: bool) -> dict[str, float]:
    """32 requests arriving every ARRIVAL_GAP_S; continuous batching."""
    if reuse_prefix:
        for robot, ids in work.prefixes.items():
            engine.register_prefix(robot, ids)
    steps_before = engine.timings.steps
    overhead_before, total_before = engine.timings.overhead_s, engine.timings.total_s
    start = time.perf_counter()
    arrivals = [start + i * ARRIVAL_GAP_S for i in range(REQUESTS)]
    live: list[int] = []
    done, tokens, next_request, latencies = 0, 0, 0, []
    while done < REQUESTS:
        now = time.perf_counter()
        while next_request < REQUESTS and arrivals[next_request] <= now:
            robot = work.tails[next_request % len(work.tails)][0]
            engine.add(
                next_request,
                work.prompt(next_request),
                SamplingParams(max_tokens=NEW_TOKENS),
                prefix_id=robot if reuse_prefix else None,
            )
            live.append(next_request)
            next_request += 1
        if not live:
            time.sleep(max(0.0, arrivals[next_request] - time.perf_counter()))
            continue
        for out in engine.step(live):
            tokens += 1
            if out.finished:
                live.remove(out.gen_id)
                done += 1
                latencies.append(time.perf_counter() - arrivals[out.gen_id])
    makespan = time.perf_counter() - start
    steps = engine.timings.steps - steps_before
    return {
        "makespan_s": makespan,
        "tokens": tokens,
        "tokens_per_s": tokens / makespan,
        "mean_latency_s": statistics.mean(latencies),
        "steps": steps,
        "overhead_per_step_s": (engine.timings.overhead_s - overhead_before) / steps,
        "step_s": (engine.timings.total_s - total_before) / steps,
    }


def swap_vs_discard(work: Workload, threads: int, repeats: int) -> dict[str, float]:
    engine = engine_for(work, threads, caching=False)
    prompt = work.prompt(0)[:1000]
    swap_in, swap_out, reprefill = [], [], []
    for rep in range(repeats):
        run_to_first_token(engine, rep, prompt)
        started = time.perf_counter()
        engine.suspend(rep, HandlingStrategy.SWAP)
        swap_out.append(time.perf_counter() - started)
        started = time.perf_counter()
        engine.resume(rep)
        swap_in.append(time.perf_counter() - started)
        engine.suspend(rep, HandlingStrategy.DISCARD)
        started = time.perf_counter()
        engine.resume(rep)
        while not engine.step([rep]):
            pass
        reprefill.append(time.perf_counter() - started)
        engine.abort(rep)
    return {
        "swap_out_s": statistics.median(swap_out),
        "swap_in_s": statistics.median(swap_in),
        "reprefill_s": statistics.median(reprefill),
    }


def ttft(work: Workload, threads: int, repeats: int) -> dict[str, float]:
    cold_engine = engine_for(work, threads, caching=False)
    warm_engine = engine_for(work, threads)
    robot = work.tails[0][0]
    warm_engine.register_prefix(robot, work.prefixes[robot])
    prompt = work.prompt(0)
    cold, warm = [], []
    for rep in range(repeats):
        started = time.perf_counter()
        run_to_first_token(cold_engine, rep, prompt)
        cold.append(time.perf_counter() - started)
        cold_engine.abort(rep)
        started = time.perf_counter()
        run_to_first_token(warm_engine, rep, prompt, prefix_id=robot)
        warm.append(time.perf_counter() - started)
        warm_engine.abort(rep)
    return {
        "prompt_tokens": len(prompt),
        "prefix_tokens": len(work.prefixes[robot]),
        "cold_s": statistics.median(cold),
        "with_prefix_s": statistics.median(warm),
    }


# ---------------------------------------------------------------- HF side
class HfBaseline:
    def __init__(self, work: Workload, eos: int) -> None:
        from transformers import AutoModelForCausalLM

        self.model: Any = AutoModelForCausalLM.from_pretrained(work.model_path, dtype=torch.float32)
        self.model.eval()
        self.eos = eos

    def generate(self, prompts: list[list[int]], max_new: int) -> int:
        """Greedy generate (left-padded batch); returns the new tokens produced."""
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        with torch.inference_mode():
            out = self.model.generate(
                ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False, pad_token_id=0
            )
        new = out[:, width:]
        finished = (new == self.eos).int().cumsum(1)
        return int(((finished == 0) | ((finished == 1) & (new == self.eos))).sum())

    def greedy(
        self, prompt: list[int], max_new: int, processors: list[Any] | None = None
    ) -> list[int]:
        """The new token ids of a greedy `generate` (with extra logits processors)."""
        from transformers import LogitsProcessorList

        ids = torch.tensor([prompt])
        with torch.inference_mode():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new,
                do_sample=False,
                pad_token_id=0,
                logits_processor=LogitsProcessorList(processors or []),
            )
        return [int(t) for t in out[0, len(prompt) :]]

    def decode(self, prompt: list[int]) -> tuple[float, list[int]]:
        """Time between successive tokens inside `generate` (a logits processor
        stamps each step) over NEW_TOKENS decode steps, and the tokens generated.
        Nothing suppresses EOS (that would add work to every HF step): the prompt
        is one whose greedy continuation has none (`decode_prompt`)."""
        from transformers import LogitsProcessor

        class StepClock(LogitsProcessor):
            def __init__(self) -> None:
                self.stamps: list[float] = []

            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
                self.stamps.append(time.perf_counter())
                return scores

        clock = StepClock()
        tokens = self.greedy(prompt, NEW_TOKENS + 1, [clock])
        return (clock.stamps[-1] - clock.stamps[0]) / max(1, len(clock.stamps) - 1), tokens

    def prefill_s(self, prompt: list[int], repeats: int) -> float:
        ids = torch.tensor([prompt])
        with torch.inference_mode():
            return median_time(lambda: self.model(ids), repeats)

    def staggered(self, work: Workload, batch: int) -> dict[str, float]:
        """Requests served in arrival order, `batch` at a time (1: one by one)."""
        start = time.perf_counter()
        arrivals = [start + i * ARRIVAL_GAP_S for i in range(REQUESTS)]
        tokens, latencies = 0, []
        for first in range(0, REQUESTS, batch):
            members = list(range(first, min(first + batch, REQUESTS)))
            time.sleep(max(0.0, arrivals[members[-1]] - time.perf_counter()))
            tokens += self.generate([work.prompt(i) for i in members], NEW_TOKENS)
            latencies += [time.perf_counter() - arrivals[i] for i in members]
        makespan = time.perf_counter() - start
        return {
            "makespan_s": makespan,
            "tokens": tokens,
            "tokens_per_s": tokens / makespan,
            "mean_latency_s": statistics.mean(latencies),
        }


# ---------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--model", type=Path, default=None, help=f"planner checkpoint folder (default {CHECKPOINT})"
    )
    args = parser.parse_args()
    console = Console()
    model = args.model or (CHECKPOINT if (CHECKPOINT / "config.json").is_file() else None)
    with tempfile.TemporaryDirectory() as tmp:
        work = planner_workload(model) if model else stand_in_workload(Path(tmp))
        results = run(work, args.threads, args.repeats, console)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


def decode_prompt(work: Workload, hf: HfBaseline) -> list[int]:
    """The longest start (at most 1,000 tokens) of a robot prompt whose greedy
    continuation runs NEW_TOKENS + 1 tokens without EOS: both sides then decode the
    same NEW_TOKENS steps, and neither needs EOS suppressed."""
    prompt = work.prompt(0)
    torch.set_num_threads(1)  # untimed; one thread is never slow
    for length in range(min(1000, len(prompt)), 0, -1):
        if hf.eos not in hf.greedy(prompt[:length], NEW_TOKENS + 1):
            return prompt[:length]
    raise RuntimeError("every start of the prompt reaches EOS within NEW_TOKENS tokens")


def decode_rounds(
    work: Workload, hf: HfBaseline, prompt: list[int], threads: int, counts: list[int], rounds: int
) -> dict[str, Any]:
    """Batch-1 decode, engine vs HF generate, each side at each thread count of
    `counts` (the engine's for its small steps), one thread count at a time, most
    threads first: the one-thread runs being compared then run back to back, not
    around two-thread runs that take seconds on a loaded machine (and the rest of
    the bench starts after one-thread runs). At each count, after a warm-up run of
    each, a round is DECODE_PAIRS runs of each side, alternating (who goes first
    alternates too), so load drift hits both alike and a round spans several
    bursts of the machine's other load; a side's time in a round is the mean of
    its runs, round i's ratio is its best HF over its best engine, and the median
    over rounds is the figure."""
    decoders = {t: engine_for(work, threads, small_threads=t) for t in counts}
    hf_runs: dict[int, list[float]] = {t: [] for t in counts}
    engine_runs: dict[int, list[float]] = {t: [] for t in counts}
    tokens: dict[str, list[int]] = {}

    def hf_side(t: int) -> float:
        torch.set_num_threads(t)
        seconds, tokens["hf"] = hf.decode(prompt)
        return seconds

    def engine_side(t: int) -> float:
        torch.set_num_threads(threads)
        seconds, tokens["engine"] = engine_decode(decoders[t], prompt)
        return seconds

    for t in sorted(counts, reverse=True):
        hf_side(t)  # warm-up
        engine_side(t)
        for _ in range(rounds):
            times: dict[str, list[float]] = {"hf": [], "engine": []}
            for pair in range(DECODE_PAIRS):
                sides = [("hf", hf_side), ("engine", engine_side)]
                for name, side in sides[:: 1 if pair % 2 == 0 else -1]:
                    times[name].append(side(t))
            hf_runs[t].append(statistics.mean(times["hf"]))
            engine_runs[t].append(statistics.mean(times["engine"]))
    ratios = [
        min(hf_runs[t][i] for t in counts) / min(engine_runs[t][i] for t in counts)
        for i in range(rounds)
    ]
    torch.set_num_threads(threads)
    if tokens["engine"] != tokens["hf"]:
        raise RuntimeError(f"engine and HF decoded different tokens: {tokens}")
    return {"prompt_tokens": len(prompt), "hf": hf_runs, "engine": engine_runs, "ratios": ratios}


def engine_prefill_s(work: Workload, threads: int, prompt: list[int], repeats: int) -> float:
    """Cold prefill (no cache hits) to the first token, median of `repeats`."""
    cold = engine_for(work, threads, caching=False)
    for rep in range(2):  # warm-up (allocator, rope table)
        run_to_first_token(cold, 9000 + rep, prompt)
        cold.abort(9000 + rep)
    times = []
    for rep in range(repeats):
        started = time.perf_counter()
        run_to_first_token(cold, rep, prompt)
        times.append(time.perf_counter() - started)
        cold.abort(rep)
    return statistics.median(times)


def run(work: Workload, threads: int, repeats: int, console: Console) -> dict[str, Any]:
    """Every measure on both sides at each side's best thread count of {1, threads}
    (a fair baseline on a shared machine, where a second thread can cost more than
    it gives); decode speeds are measured in alternating rounds so that load drift
    hits both sides alike."""
    console.print(f"model: {work.source}; up to {threads} threads; shared machine: expect noise")
    counts = sorted({1, threads})
    peak = max(matmul_peak(t, repeats) for t in counts)
    engine = engine_for(work, threads)
    prompt_1000 = work.prompt(0)[:1000]
    hf = HfBaseline(work, engine.eos_token_id)
    flops = prefill_flops(engine, len(prompt_1000))

    engine_prefill = {t: engine_prefill_s(work, t, prompt_1000, repeats) for t in counts}
    hf_prefill: dict[int, float] = {}
    for t in counts:
        torch.set_num_threads(t)
        hf_prefill[t] = hf.prefill_s(prompt_1000, repeats)
    decode = decode_rounds(
        work, hf, decode_prompt(work, hf), threads, counts, max(DECODE_ROUNDS, repeats)
    )
    ratios = decode["ratios"]
    engine_runs, hf_runs = decode["engine"], decode["hf"]
    engine_decode_median = {t: statistics.median(v) for t, v in engine_runs.items()}
    small_threads = min(counts, key=lambda t: engine_decode_median[t])
    hf_decode_median = {t: statistics.median(v) for t, v in hf_runs.items()}

    def hf_request_s(t: int) -> float:
        return hf_prefill[t] + NEW_TOKENS * hf_decode_median[t]

    hf_threads = min(counts, key=hf_request_s)
    engine_threads = min(counts, key=lambda t: engine_prefill[t])
    torch.set_num_threads(hf_threads)
    hf_one = hf.staggered(work, 1)
    hf_static = hf.staggered(work, STATIC_BATCH)
    torch.set_num_threads(threads)
    hf_best = max((hf_one, hf_static), key=lambda r: r["tokens_per_s"])
    shared = engine_staggered(
        engine_for(work, engine_threads, small_threads=small_threads), work, reuse_prefix=True
    )
    unshared = engine_staggered(
        engine_for(work, engine_threads, caching=False, small_threads=small_threads), work, False
    )

    swap = swap_vs_discard(work, engine_threads, repeats)
    first_token = ttft(work, engine_threads, repeats)
    best_engine_prefill = min(engine_prefill.values())

    results: dict[str, Any] = {
        "model": work.source,
        "machine": {"platform": platform.platform(), "max_threads": threads},
        "threads": {
            "engine_prefill": engine_threads,
            "engine_small_steps": small_threads,
            "hf": hf_threads,
        },
        "matmul_peak_gflops": peak,
        "prefill_1000": {
            "engine_s_by_threads": engine_prefill,
            "hf_s_by_threads": hf_prefill,
            "useful_gflop": flops / 1e9,
            "engine_fraction_of_peak": flops / best_engine_prefill / 1e9 / peak,
            "hf_fraction_of_peak": flops / min(hf_prefill.values()) / 1e9 / peak,
        },
        "decode_batch1": {
            "prompt_tokens": decode["prompt_tokens"],
            "new_tokens": NEW_TOKENS,
            "engine_s_per_token": engine_decode_median[small_threads],
            "engine_s_per_token_by_small_step_threads": engine_decode_median,
            "hf_s_per_token_by_threads": hf_decode_median,
            "engine_s_per_token_runs": engine_runs,
            "hf_s_per_token_runs": hf_runs,
            "speedup_vs_best_hf_per_round": ratios,
            "speedup_vs_best_hf": statistics.median(ratios),
            "speedup_vs_hf_default_threads": hf_decode_median[threads]
            / engine_decode_median[small_threads],
        },
        "staggered_32": {
            "hf_one_by_one": hf_one,
            "hf_static_batches": hf_static | {"batch": STATIC_BATCH},
            "engine_with_prefix": shared,
            "engine_without_prefix_reuse": unshared,
            "speedup_with_prefix": shared["tokens_per_s"] / hf_best["tokens_per_s"],
            "speedup_without_prefix_reuse": unshared["tokens_per_s"] / hf_best["tokens_per_s"],
        },
        "swap_vs_discard_1000": swap
        | {"swap_in_over_reprefill": swap["swap_in_s"] / swap["reprefill_s"]},
        "ttft": first_token
        | {"reduction": 1 - first_token["with_prefix_s"] / first_token["cold_s"]},
        "per_iteration_overhead_s": shared["overhead_per_step_s"],
    }
    print_table(console, results)
    return results


def print_table(console: Console, r: dict[str, Any]) -> None:
    table = Table(title="torch engine vs transformers (same run)")
    for column in ("measure", "engine", "baseline", "ratio", "goal"):
        table.add_column(column)
    d, s, p = r["decode_batch1"], r["staggered_32"], r["prefill_1000"]
    sw, t = r["swap_vs_discard_1000"], r["ttft"]
    best_hf_decode = min(d["hf_s_per_token_by_threads"].values())
    hf_best = max(s["hf_one_by_one"]["tokens_per_s"], s["hf_static_batches"]["tokens_per_s"])
    rows = [
        (
            "decode, batch 1 (ms/token)",
            d["engine_s_per_token"] * 1e3,
            best_hf_decode * 1e3,
            f"{d['speedup_vs_best_hf']:.2f}x (vs HF at default threads "
            f"{d['speedup_vs_hf_default_threads']:.1f}x)",
            ">= 2x",
        ),
        (
            "32 staggered, shared prefix (tok/s)",
            s["engine_with_prefix"]["tokens_per_s"],
            hf_best,
            f"{s['speedup_with_prefix']:.2f}x",
            ">= 4x",
        ),
        (
            "32 staggered, no prefix reuse (tok/s)",
            s["engine_without_prefix_reuse"]["tokens_per_s"],
            hf_best,
            f"{s['speedup_without_prefix_reuse']:.2f}x",
            "report",
        ),
        (
            "prefill 1,000 tokens (s)",
            min(p["engine_s_by_threads"].values()),
            min(p["hf_s_by_threads"].values()),
            f"{p['engine_fraction_of_peak']:.0%} of peak (HF {p['hf_fraction_of_peak']:.0%})",
            ">= 40% of peak",
        ),
        (
            "resume 1,000: swap-in vs re-prefill (ms)",
            sw["swap_in_s"] * 1e3,
            sw["reprefill_s"] * 1e3,
            f"{sw['swap_in_over_reprefill']:.1%}",
            "<= 15%",
        ),
        (
            "TTFT with prefix vs cold (ms)",
            t["with_prefix_s"] * 1e3,
            t["cold_s"] * 1e3,
            f"{t['reduction']:.0%} lower",
            ">= 80% lower",
        ),
        (
            "per-iteration overhead (ms)",
            r["per_iteration_overhead_s"] * 1e3,
            s["engine_with_prefix"]["step_s"] * 1e3,
            "outside forward / whole step",
            "report",
        ),
    ]
    for name, engine, base, ratio, goal in rows:
        table.add_row(name, f"{engine:.3g}", f"{base:.3g}", ratio, goal)
    console.print(table)
    console.print(
        f"matmul peak {r['matmul_peak_gflops']:.0f} GFLOP/s; threads {r['threads']}; "
        f"model: {r['model']}"
    )


if __name__ == "__main__":
    main()
