"""`lrtrace profile-engine`: load the real TorchEngine, measure it, save a profile."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from lrtrace.errors import LrtraceError
from lrtrace.outputs import check_file
from lrtrace.profile_engine import ProfilePlan, measure, profile_from
from lrtrace.profiles import check_name, path_of, save


def kv_bytes_per_token(config: dict[str, int], dtype_bytes: int) -> int:
    """Layers x KV heads x head dim x 2 (K and V) x bytes per value."""
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads", heads))
    head_dim = int(config.get("head_dim", int(config["hidden_size"]) // heads))
    return int(config["num_hidden_layers"]) * kv_heads * head_dim * 2 * dtype_bytes


def copy_bytes_per_s(megabytes: int = 64, repeats: int = 5) -> float:
    """Host memory copy bandwidth: on a CPU engine, swapping KV out and in is a copy."""
    import statistics
    import time

    import torch

    x = torch.empty(megabytes * 2**20 // 4, dtype=torch.float32).fill_(1.0)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        x.clone()
        times.append(time.perf_counter() - start)
    return x.numel() * 4 / statistics.median(times)


def robot_prefix_tokens(model: Path) -> int:
    """Tokens of the longest robot prompt prefix (robot_models) under `model`'s tokenizer."""
    from tokenizers import Tokenizer

    from robot_models.prompts import prompt_prefix

    path = model / "tokenizer.json"
    if not path.is_file():
        raise LrtraceError(f"no tokenizer at {path}: pass --prefix-tokens")
    tokenizer = Tokenizer.from_file(str(path))
    return max(len(tokenizer.encode(prompt_prefix(t)).ids) for t in ("drone", "arm"))


def run(args: argparse.Namespace, console: Console) -> int:
    from lrtrace.replay.targets.service import torch_engine_config
    from robot_models.checkpoints import default_planner_path
    from timely_core.engine.torch.engine import TorchEngine

    # everything the flags can get wrong is refused before minutes of measuring
    check_name(args.name)
    out = args.out or path_of(args.name)
    check_file(out, "profile")
    engine_config = torch_engine_config(args.threads)
    model = args.model or default_planner_path()
    config_path = model / "config.json"
    if not config_path.is_file():
        raise LrtraceError(f"no checkpoint at {model} (config.json missing)")
    if args.repeats < 1:
        raise LrtraceError("--repeats must be >= 1")
    if args.service_duration < 0 or args.service_eps <= 0:
        raise LrtraceError("--service-duration must be >= 0 and --service-eps > 0")
    prefix_tokens = args.prefix_tokens
    if prefix_tokens is None:
        prefix_tokens = robot_prefix_tokens(model)
    if prefix_tokens < 0:
        raise LrtraceError("--prefix-tokens must be >= 0")
    hf_config = json.loads(config_path.read_text())
    engine = TorchEngine(model, engine_config)
    per_token = kv_bytes_per_token(hf_config, 4)
    plan = ProfilePlan(repeats=args.repeats, prefix_tokens=prefix_tokens)
    with console.status("profiling the engine") as status:
        samples = measure(engine, int(hf_config["vocab_size"]), plan, status.update)
    memory = engine.memory()
    capacity = memory.device_blocks_total * memory.block_size
    profile = profile_from(
        args.name,
        f"TorchEngine on this machine's CPU, checkpoint {model.name}, "
        f"{args.threads or 'default'} threads, "
        + (
            f"prompts after a shared {prefix_tokens}-token prefix"
            if prefix_tokens
            else "fresh prompts"
        ),
        samples,
        capacity,
        engine_config.max_batched_tokens,
    ).model_copy(update={"kv_bytes_per_token": per_token, "swap_bytes_per_s": copy_bytes_per_s()})
    if args.service_duration > 0:
        from lrtrace.replay.targets.service import ServiceTarget
        from lrtrace.service_overhead import describe, measure_overhead, workload

        spec = workload(args.service_eps, args.service_duration)
        target = ServiceTarget.from_checkpoint(model, args.threads)
        with console.status("measuring the service") as status:
            overhead = measure_overhead(target, spec, progress=status.update)
        mean = sum(s.per_iteration_s for s in overhead) / len(overhead)
        profile = profile.model_copy(
            update={
                "service_overhead_s": mean,
                "derivation": f"{profile.derivation}; {describe(overhead, spec)}",
            }
        )
    path = save(profile, out)
    console.print(
        f"{path}: fixed {profile.iteration_s * 1e3:.2f} ms, prefill "
        f"{profile.prefill_token_s * 1e6:.1f} us/token, decode {profile.decode_s * 1e3:.3f} "
        f"ms/sequence, context {profile.context_token_s * 1e9:.1f} ns/token; fit error p50 "
        f"{100 * (profile.rel_error_p50 or 0):.1f}%, "
        f"p95 {100 * (profile.rel_error_p95 or 0):.1f}%; service overhead "
        f"{profile.service_overhead_s * 1e3:.2f} ms/iteration"
    )
    return 0
