"""vLLM in process on the host's accelerator, through Timely's engine and service (#20).

The GPU image plans on vLLM with FlashInfer attention; this runs that path where it is
run: `VllmEngine` (grammar processor loaded), then the `PlanningService` on it. Per
configuration (on a GPU: FlashInfer in bfloat16 on the planner widened to 64-wide
heads, then Triton attention in float32 on the planner itself, without and with
vLLM's KV offloading to host memory (swap); on a CPU: vLLM-CPU's attention in
float32), one engine at a time:

- `plans`: the LRTrace tasks decoded greedily together, token for token against the
  torch engine's greedy plans (float32, on the host's CPU, in the same run);
- `service`: the PlanningService (timely policy, real clock) plans them for
  `--robots` robots with each robot's plan grammar and without: how many plans
  equal the task's golden plan, how many fail;
- `suspend`: each strategy the engine accepts, mid-plan, then resumed: the output
  equals the uninterrupted one; the tokens vLLM reports cached at the resume;
- `speed`: 32 requests arriving 50 ms apart sharing their robot's prefix (tok/s),
  batch-1 decode tok/s, and a resume at a 1,000-token context with vLLM's prefix
  cache warm vs reset (bench/vllm_backend.py's workloads).

One failing part is reported and the rest still runs. Prints a table; writes JSON.

    PYTHONPATH=. python bench/vllm_gpu.py [--robots 22] [--gpu-memory 0.3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from robot_models.checkpoints.widen_heads import widen
from timely_core.engine.protocol import Engine, HandlingStrategy, SamplingParams
from timely_core.engine.vllm.config import VllmConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import gpu_matmul_tflops, matmul_gflops
from vllm_backend import (
    CHECKPOINT,
    decode,
    decode_prompt,
    looping_context,
    resume_cost,
    robot_workload,
    staggered,
)

RESULTS = Path(__file__).resolve().parent / "results" / "vllm_gpu.json"
PLAN_TOKENS = 200
SUSPEND_AFTER = 6  # tokens decoded before the suspension
SUSPEND_TOKENS = 40


def configurations(gpu: bool, gpu_memory: float) -> list[tuple[str, Path, Any]]:
    """(label, checkpoint, VllmConfig) in the order they run (on a GPU, the planner
    widened for FlashInfer first, into a temporary folder)."""
    if not gpu:
        return [("vLLM-CPU fp32", CHECKPOINT, VllmConfig(max_num_seqs=64))]
    widened = widen(CHECKPOINT, Path(tempfile.mkdtemp(prefix="planner-hd64-")) / "planner", 64)
    common: dict[str, Any] = {"max_num_seqs": 64, "gpu_memory_utilization": gpu_memory}
    return [
        (
            "FlashInfer bf16 (heads widened to 64)",
            widened,
            VllmConfig(dtype="bfloat16", attention_backend="FLASHINFER", **common),
        ),
        (
            "Triton fp32",
            CHECKPOINT,
            VllmConfig(dtype="float32", attention_backend="TRITON_ATTN", **common),
        ),
        (
            "KV offloading, Triton fp32",
            CHECKPOINT,
            VllmConfig(  # preserve, discard and swap
                dtype="float32", attention_backend="TRITON_ATTN", kv_offload_gib=1, **common
            ),
        ),
    ]


def greedy_all(
    engine: Engine,
    prompts: list[tuple[str, list[int]]],
    first_id: int,
    max_tokens: int = PLAN_TOKENS,
) -> list[list[int]]:
    """Every prompt added at once, decoded greedily to its end: the generated ids."""
    out: dict[int, list[int]] = {}
    for i, (robot, prompt) in enumerate(prompts):
        engine.add(first_id + i, prompt, SamplingParams(max_tokens=max_tokens), robot)
        out[first_id + i] = []
    live = list(out)
    while live:
        for step in engine.step(live):
            out[step.gen_id].append(step.token_id)
            if step.finished:
                live.remove(step.gen_id)
    return [out[first_id + i] for i in range(len(prompts))]


def compare_plans(
    reference: list[list[int]], got: list[list[int]], decode_ids: Callable[[list[int]], str]
) -> dict[str, Any]:
    same = [r == g for r, g in zip(reference, got, strict=True)]
    first_diff = [
        next((k for k, (a, b) in enumerate(zip(r, g, strict=False)) if a != b), min(len(r), len(g)))
        for r, g in zip(reference, got, strict=True)
    ]
    return {
        "tasks": len(same),
        "token_identical": sum(same),
        "tokens": sum(len(r) for r in reference),
        "differing": [
            {
                "task": i,
                "first_differing_token": first_diff[i],
                "reference": decode_ids(r),
                "got": decode_ids(g),
            }
            for i, (r, g) in enumerate(zip(reference, got, strict=True))
            if r != g
        ],
    }


def plan_with_service(engine: Engine, robots: int, grammar: bool) -> dict[str, Any]:
    """The PlanningService on `engine`: `robots` robots each plan one LRTrace task,
    acknowledging every segment; plans equal to the golden plan, failures, time."""
    from tokenizers import Tokenizer

    from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS
    from robot_models.language import load_language
    from timely_core.clock import MonotonicClock
    from timely_core.request import TaskRequest
    from timely_core.scheduling.tuf import Tuf
    from timely_core.service import PlanningService
    from timely_core.service_config import ServiceConfig

    tokenizer = Tokenizer.from_file(str(CHECKPOINT / "tokenizer.json"))
    service = PlanningService(
        engine,
        tokenizer,
        policy="timely",
        clock=MonotonicClock(),
        config=ServiceConfig(max_tokens=PLAN_TOKENS, grammar=grammar),
        languages={t: load_language(t) for t in ("drone", "arm")},
    )
    tasks = [LRTRACE_TASKS[i % len(LRTRACE_TASKS)] for i in range(robots)]
    for i, task in enumerate(tasks):
        service.register_robot(f"robot{i}", robot_type=task.robot_type)
    outcome: dict[str, list[str]] = {"golden": [], "other": [], "failed": []}
    lock = threading.Lock()

    def robot(i: int) -> None:
        task = tasks[i]
        handle = service.submit(
            TaskRequest(
                robot_id=f"robot{i}",
                scene=task.scene,
                instruction=task.instruction,
                tuf=Tuf.preset(task.urgency),
            )
        )
        texts = []
        for segment in handle.segments(timeout_s=300):
            texts.append(segment.text)
            handle.segment_done(segment.index)
        result = handle.result(timeout_s=300)
        plan = "".join(texts)
        with lock:
            if not result.success:
                outcome["failed"].append(f"robot{i} ({task.name}): {result.error}")
            elif plan == task.golden_plan:
                outcome["golden"].append(task.name)
            else:
                outcome["other"].append(f"robot{i} ({task.name}): {plan!r}")

    started = time.perf_counter()
    service.start()
    try:
        threads = [threading.Thread(target=robot, args=(i,)) for i in range(robots)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        service.stop()
    stats = service.stats()
    return {
        "grammar": grammar,
        "robots": robots,
        "golden": len(outcome["golden"]),
        "other": outcome["other"],
        "failed": outcome["failed"],
        "segments": stats.segments_emitted,
        "seconds": time.perf_counter() - started,
    }


def suspend_resume(engine: Any, prompt: list[int], first_id: int) -> list[dict[str, Any]]:
    """Each accepted strategy: suspended after SUSPEND_AFTER tokens, resumed; the
    output against the uninterrupted one, and the cached tokens vLLM reports when
    the resumed request is scheduled. A swap has the GPU's prefix cache reset while
    it waits, so what its resume finds cached came back from host memory."""
    whole = greedy_all(engine, [("drone", prompt)], first_id, SUSPEND_TOKENS)[0]
    results = []
    for k, strategy in enumerate(sorted(engine.suspend_strategies, key=lambda s: s.value)):
        gen_id = first_id + 1 + k
        engine.add(gen_id, prompt, SamplingParams(max_tokens=SUSPEND_TOKENS), "drone")
        got: list[int] = []
        while len(got) < SUSPEND_AFTER:
            got += [s.token_id for s in engine.step([gen_id])]
        engine.suspend(gen_id, strategy)
        evicted = strategy is HandlingStrategy.SWAP and bool(engine.llm.reset_prefix_cache())
        engine.resume(gen_id)
        cached = None
        finished = False
        while not finished:
            for step in engine.step([gen_id]):
                got.append(step.token_id)
                finished = step.finished
            if cached is None and not finished:
                cached = engine.generation(gen_id).cached_tokens
        results.append(
            {
                "strategy": strategy.value,
                "equal_to_uninterrupted": got == whole,
                "cached_tokens_at_resume": cached,
                "gpu_prefix_cache_reset": evicted,
                "context_tokens": len(prompt) + SUSPEND_AFTER,
            }
        )
    return results


def speed(engine: Any, prompts: list[tuple[str, list[int]]], repeats: int) -> dict[str, Any]:
    runs = [staggered(engine, prompts, 20_000 + 1000 * r) for r in range(repeats)]
    decodes = [decode(engine, decode_prompt(), 30_000 + r) for r in range(repeats)]
    return {
        "staggered_tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs),
        "staggered_mean_latency_s": statistics.median(r["mean_latency_s"] for r in runs),
        "decode_tokens_per_s": statistics.median(decodes),
        "resume": resume_cost(engine, looping_context(992), repeats),
    }


def part(results: dict[str, Any], name: str, fn: Callable[[], Any]) -> None:
    """results[name] = fn(), or what failed (the other parts still run)."""
    try:
        results[name] = fn()
    except Exception as exc:  # a GPU check reports every part it can
        results[name] = {
            "error": f"{type(exc).__name__}: {exc}",
            "trace": traceback.format_exc()[-3000:],
        }


def machine() -> dict[str, Any]:
    """Versions, the device, and its matmul peak (bf16 8192^3 on a GPU)."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "load_average_before": os.getloadavg()[0],
    }
    for package in ("vllm", "flashinfer"):
        try:
            info[package] = __import__(package).__version__
        except Exception as exc:  # said in the results, never fatal
            info[package] = f"not importable: {exc}"
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["matmul_tflops_bf16"] = gpu_matmul_tflops()
        torch.cuda.empty_cache()
    else:
        info["cpu"] = platform.processor() or platform.machine()
        info["matmul_gflops_fp32"] = matmul_gflops()
    return info


def _cell(run: dict[str, Any], key: str, fmt: Callable[[Any], str]) -> str:
    value = run.get(key)
    if value is None:
        return "-"
    if isinstance(value, dict) and "error" in value:
        return "error"
    return fmt(value)


def show(console: Console, results: dict[str, Any]) -> None:
    table = Table(title=f"vLLM in process: {results['machine'].get('gpu', 'CPU')}")
    table.add_column("configuration")
    table.add_column("plans = torch", justify="right")
    table.add_column("service golden (no grammar / grammar)", justify="right")
    table.add_column("suspend/resume equal", justify="right")
    table.add_column("staggered tok/s", justify="right")
    table.add_column("decode tok/s", justify="right")
    table.add_column("resume warm / cold ms", justify="right")
    for label, run in results["configurations"].items():
        services = [run.get(f"service_{g}") for g in ("plain", "grammar")]
        table.add_row(
            label,
            _cell(run, "plans", lambda p: f"{p['token_identical']}/{p['tasks']}"),
            " / ".join(
                "-" if s is None else "error" if "error" in s else f"{s['golden']}/{s['robots']}"
                for s in services
            ),
            _cell(
                run,
                "suspend",
                lambda s: ", ".join(f"{r['strategy']} {r['equal_to_uninterrupted']}" for r in s),
            ),
            _cell(run, "speed", lambda s: f"{s['staggered_tokens_per_s']:.0f}"),
            _cell(run, "speed", lambda s: f"{s['decode_tokens_per_s']:.0f}"),
            _cell(
                run,
                "speed",
                lambda s: f"{s['resume']['warm_s'] * 1e3:.1f} / {s['resume']['cold_s'] * 1e3:.1f}",
            ),
        )
    console.print(table)
    for label, run in results["configurations"].items():
        for key, value in run.items():
            if isinstance(value, dict) and "error" in value:
                console.print(f"[red]{label} {key}: {value['error']}[/red]")


def check(
    engine: Any,
    run: dict[str, Any],
    prefixes: dict[str, list[int]],
    prompts: list[tuple[str, list[int]]],
    reference: list[list[int]],
    text: Callable[[list[int]], str],
    args: argparse.Namespace,
) -> None:
    """Every part on one engine, into `run`."""
    for robot, ids in prefixes.items():
        engine.register_prefix(robot, ids)
    run["prefix_cached_tokens"] = dict(engine.prefix_cached_tokens)
    part(run, "plans", lambda: compare_plans(reference, greedy_all(engine, prompts, 100), text))
    part(run, "suspend", lambda: suspend_resume(engine, prompts[0][1], 200))
    part(run, "service_plain", lambda: plan_with_service(engine, args.robots, grammar=False))
    part(run, "service_grammar", lambda: plan_with_service(engine, args.robots, grammar=True))
    part(run, "speed", lambda: speed(engine, prompts, args.repeats))


def write(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", type=int, default=22, help="robots in each service run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each speed figure")
    parser.add_argument("--gpu-memory", type=float, default=0.3, help="vLLM's share of the GPU")
    parser.add_argument(
        "--only", default="", help="run the configurations whose label starts with this"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_CACHE_ROOT", tempfile.mkdtemp(prefix="vllm-cache-"))
    console = Console(width=160)
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine
    from timely_core.engine.torch.loader import load_tokenizer
    from timely_core.engine.vllm.engine import VllmEngine

    gpu = torch.cuda.is_available()
    results: dict[str, Any] = {"machine": machine(), "configurations": {}}
    console.print(results["machine"])
    tokenizer = load_tokenizer(CHECKPOINT)

    def text(ids: list[int]) -> str:
        return str(tokenizer.decode(ids, skip_special_tokens=False))

    prefixes, prompts = robot_workload()  # one prompt per LRTrace task
    reference_engine = TorchEngine(CHECKPOINT, EngineConfig())
    for robot, ids in prefixes.items():
        reference_engine.register_prefix(robot, ids)
    reference = greedy_all(reference_engine, prompts, 1)
    for label, checkpoint, config in configurations(gpu, args.gpu_memory):
        if not label.startswith(args.only):
            continue
        run: dict[str, Any] = {"config": config.model_dump(mode="json")}
        results["configurations"][label] = run
        console.print(f"[bold]{label}[/bold]: building vLLM's engine")
        started = time.perf_counter()
        try:
            engine = VllmEngine(checkpoint, config)
        except Exception as exc:  # reported, and the next configuration runs
            run["build"] = {
                "error": f"{type(exc).__name__}: {exc}",
                "trace": traceback.format_exc()[-3000:],
            }
            console.print(f"[red]{label}: {run['build']['error']}[/red]")
            continue
        run["build_s"] = time.perf_counter() - started
        try:
            check(engine, run, prefixes, prompts, reference, text, args)
        finally:
            engine.close()
            del engine
            gc.collect()
            if gpu:
                torch.cuda.empty_cache()  # the next configuration sizes its KV from what is free
        console.print(f"{label}: done in {time.perf_counter() - started:.0f} s")
        write(args.out, results)  # a later configuration that hangs keeps this one's figures
    results["machine"]["load_average_after"] = os.getloadavg()[0]
    show(console, results)
    write(args.out, results)
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
