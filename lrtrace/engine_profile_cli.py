"""`lrtrace profile-engine`: load the real TorchEngine, measure it, save a profile.

Every flag is checked before the minutes of measuring start (`checked_flags`): a
value found wrong after them (a service load pydantic refuses, a prefix longer than
the model's context) would throw the measurement away. The profile is written into
the current directory unless `--out` says where: a default in lrtrace/profiles/
would replace a committed profile.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError
from rich.console import Console

from lrtrace.errors import LrtraceError
from lrtrace.outputs import check_distinct, check_file
from lrtrace.profile_engine import ProfilePlan, measure, profile_from
from lrtrace.profiles import check_name, save
from lrtrace.workload import WorkloadSpec

if TYPE_CHECKING:  # torch is imported only when the engine is measured
    from timely_core.engine.torch.config import EngineConfig

MAX_SERVICE_DURATION_S: Final = 3600.0  # per policy, on the real engine's clock
BLOCK_ROOM: Final = 32  # a request's partly filled KV blocks (two of 16 tokens)


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


def service_load(eps: float, duration_s: float) -> WorkloadSpec | None:
    """The service-overhead load of `--service-eps` and `--service-duration` (None for
    a duration of 0: not measured), or one line naming the flag that is wrong."""
    from lrtrace.service_overhead import workload

    if not (math.isfinite(duration_s) and 0 <= duration_s <= MAX_SERVICE_DURATION_S):
        raise LrtraceError(
            f"--service-duration {duration_s:g}: a number of seconds from 0 (not measured) "
            f"to {MAX_SERVICE_DURATION_S:g}"
        )
    if not (math.isfinite(eps) and eps > 0):
        raise LrtraceError(f"--service-eps {eps:g}: a number of events per second > 0")
    if duration_s == 0:
        return None
    flags = {"eps": f"--service-eps {eps:g}", "duration_s": f"--service-duration {duration_s:g}"}
    try:
        return workload(eps, duration_s)
    except ValidationError as err:  # a bound of WorkloadSpec: a field's, or the task count
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise LrtraceError(f"{flags.get(field, ' with '.join(flags.values()))}: {msg}") from None


def max_prefix_tokens(hf_config: dict[str, Any], config: EngineConfig, plan: ProfilePlan) -> int:
    """The longest prefix `measure` can profile: each prompt, the prefix and a request,
    must leave the model's context room for the decode steps, and the engine's device
    KV must hold the prefix and the largest decode batch's requests beside it."""
    per_request = plan.request_tokens + max(plan.decode_steps, plan.repeats) + 1
    context = int(hf_config.get("max_position_embeddings", 2**31)) - per_request
    per_token = kv_bytes_per_token(hf_config, config.torch_dtype.itemsize)
    beside = (max(plan.served_decode_batches) + 1) * (per_request + BLOCK_ROOM)
    return max(0, min(context, config.device_kv_bytes // per_token - beside))


@dataclass(frozen=True)
class Checked:
    """The flags, validated: where the profile goes, the checkpoint and the engine's
    config, what to measure, and the service load (None: not measured)."""

    out: Path
    model: Path
    hf_config: dict[str, Any]
    engine_config: EngineConfig
    plan: ProfilePlan
    service: WorkloadSpec | None


def checked_flags(args: argparse.Namespace) -> Checked:
    """Everything the flags can get wrong, refused before minutes of measuring."""
    from lrtrace.replay.targets.service import torch_engine_config
    from robot_models.checkpoints import default_planner_path

    check_name(args.name)
    out = args.out or Path(f"{args.name}.json")
    model = args.model or default_planner_path()
    config_path = model / "config.json"
    inputs = [("the checkpoint's config", config_path), ("its tokenizer", model / "tokenizer.json")]
    check_distinct([("--out", out)], inputs)
    check_file(out, "profile")
    engine_config = torch_engine_config(args.threads)
    if not config_path.is_file():
        raise LrtraceError(f"no checkpoint at {model} (config.json missing)")
    if args.repeats < 1:
        raise LrtraceError("--repeats must be >= 1")
    service = service_load(args.service_eps, args.service_duration)
    try:
        hf_config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise LrtraceError(f"{config_path}: not a checkpoint's config ({err})") from None
    prefix_tokens = args.prefix_tokens
    if prefix_tokens is None:
        prefix_tokens = robot_prefix_tokens(model)
    if prefix_tokens < 0:
        raise LrtraceError("--prefix-tokens must be >= 0")
    plan = ProfilePlan(repeats=args.repeats, prefix_tokens=prefix_tokens)
    room = max_prefix_tokens(hf_config, engine_config, plan)
    if prefix_tokens > room:
        raise LrtraceError(
            f"--prefix-tokens {prefix_tokens}: at most {room} for {model.name} (each prompt, "
            "the prefix and a request, must fit the model's context, and a batch the KV)"
        )
    return Checked(out, model, hf_config, engine_config, plan, service)


def run(args: argparse.Namespace, console: Console) -> int:
    from timely_core.engine.torch.engine import TorchEngine

    flags = checked_flags(args)
    model, hf_config, prefix_tokens = flags.model, flags.hf_config, flags.plan.prefix_tokens
    engine = TorchEngine(model, flags.engine_config)
    per_token = kv_bytes_per_token(hf_config, flags.engine_config.torch_dtype.itemsize)
    plan = flags.plan
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
        flags.engine_config.max_batched_tokens,
    ).model_copy(update={"kv_bytes_per_token": per_token, "swap_bytes_per_s": copy_bytes_per_s()})
    if flags.service is not None:
        from lrtrace.replay.targets.service import ServiceTarget
        from lrtrace.service_overhead import describe, measure_overhead

        spec = flags.service
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
    path = save(profile, flags.out)
    console.print(
        f"{path}: fixed {profile.iteration_s * 1e3:.2f} ms, prefill "
        f"{profile.prefill_token_s * 1e6:.1f} us/token, decode {profile.decode_s * 1e3:.3f} "
        f"ms/sequence, context {profile.context_token_s * 1e9:.1f} ns/token; fit error p50 "
        f"{100 * (profile.rel_error_p50 or 0):.1f}%, "
        f"p95 {100 * (profile.rel_error_p95 or 0):.1f}%; service overhead "
        f"{profile.service_overhead_s * 1e3:.2f} ms/iteration"
    )
    return 0
