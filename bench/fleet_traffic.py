"""Mixed traffic over a fleet's variants on one device (one run, the planner on CPU):
one torch engine serving every LoRA variant in mixed batches, against the two ways
a fleet serves fine-tunes without it, each given the same total memory (weights +
KV) and the same single CPU thread:

- **one engine**: the base once, each variant's adapter, one KV pool; every request
  runs with its robot's adapter in whatever batch it lands in (S-LoRA / Punica).
- **per-variant engines**: each variant merged into its own full model, one engine
  per variant, the memory left after the 8 models split evenly into 8 KV pools. The
  engines take turns on the device (each step timed), as processes sharing one
  accelerator do.
- **merge per variant**: one model and one KV pool; the variants' requests are served
  group by group, the adapter merged into the weights before a group and unmerged
  after (peft `merge_adapter`/`unmerge_adapter`, timed on the same CPU); grouping is
  the kind choice for this baseline (a switch per request would cost more).

The default budgets run from one where a per-variant engine holds its prompt prefix
but no request beside it (96 MB: "does not fit"), through ones where memory binds
the per-variant engines to a request or two at a time (97-98 MB), to ones with room
for every request (99 MB and up), where only compute separates the contenders.

The fleet (`--fleet`):
- `drone` (default): the shipped drone LoRA variants, padded with random adapters
  (rank 8 on every projection of every layer) to `--variants`.
- `shipped`: the shipped fleet as it is, every LoRA variant and full fine-tune of
  both robot types, each robot's requests its own type's (written to
  fleet_traffic_shipped.json).

Each robot's prompt prefix is registered once per variant (a LoRA changes its KV,
unless it writes the base's: the one engine then serves those variants the base's
prefix blocks, as the service does). Requests: the LRTrace tasks of each variant's
robot type, round-robin over the variants, all queued at the start (throughput at
saturation); greedy, `--max-tokens` each. Reported per total memory: generated
tokens per second of device time, mean completion time, requests that could not be
admitted at all, and whether each request's tokens equal the one engine's. Device
time is the sum of measured engine calls and merges (single thread, run one after
another), so a contender is not helped by running in parallel with another on this
machine's second core. Each contender runs `--repeats` times per budget, the
contenders taking turns, and the run of median device time is reported (every
run's device time is in the JSON).

Then the urgent-utility runs (fleet_traffic_tuf.py): an LRTrace trace of the fleet's
tasks arriving over time (Poisson events of 1-8 tasks, the traces of its robot types
with their urgency classes, each robot tagged with a variant of its type) at each
`--tuf-eps` (one run each, single: '' for none), served by the same
contenders at `--tuf-memory-mb` (and by the one engine running urgent generations
alone while any are live); per urgency class the mean TUF utility of its maximum
and the p95 response time.

    PYTHONPATH=. .venv/bin/python bench/fleet_traffic.py [--fleet drone|shipped]
        [--memory-mb 96,97,98,99,100,110,140] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from robot_models.checkpoints import default_planner_path
from robot_models.dataset import LRTRACE_TASKS
from robot_models.language import load_language
from timely_core.engine.protocol import GenerationsFailed, OutOfKvMemory, SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.loader import load_tokenizer
from timely_core.scheduling.tuf import Tuf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord
from fleet_variants import variant_adapters

from robot_models.variants.spec import load_fleet

RESULTS = Path(__file__).resolve().parent / "results" / "fleet_traffic.json"
SHIPPED_RESULTS = RESULTS.with_name("fleet_traffic_shipped.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass
class Request:
    index: int
    variant: str
    prompt: list[int]
    robot_type: str = "drone"

    @property
    def prefix_id(self) -> str:
        return f"{self.robot_type}@{self.variant}"


@dataclass
class Outcome:
    tokens: dict[int, list[int]] = field(default_factory=dict)
    done_s: dict[int, float] = field(default_factory=dict)
    device_s: float = 0.0
    refused: list[int] = field(default_factory=list)  # never admissible: too little KV
    switches: int = 0
    setup_s: float = 0.0  # prefilling the robots' prefixes, before any request (Teola)
    runs: list[Outcome] = field(default_factory=list)  # every repeat, where repeated

    def summary(self, requests: list[Request], reference: Outcome | None) -> dict[str, Any]:
        generated = sum(len(t) for t in self.tokens.values())
        done = list(self.done_s.values())
        same = None
        if reference is not None:
            same = sum(self.tokens.get(r.index) == reference.tokens.get(r.index) for r in requests)
        return {
            "served": len(self.tokens),
            "refused": len(self.refused),
            "generated_tokens": generated,
            "device_s": self.device_s,
            "tokens_per_s": generated / self.device_s if self.device_s else 0.0,
            "mean_completion_s": statistics.fmean(done) if done else None,
            "variant_switches": self.switches,
            "prefix_setup_s": self.setup_s,
            "tokens_equal_one_engine": same,
        }


class Device:
    """One thread of compute shared by every engine of a contender: each call is
    timed and the device clock moves by it."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def run(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self.now_s += time.perf_counter() - started


def timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
    started = time.perf_counter()
    call(*args, **kwargs)
    return time.perf_counter() - started


def fleet_requests(
    robot_types: dict[str, str], per_variant: int
) -> tuple[dict[str, list[int]], list[Request]]:
    """Each robot type's prompt prefix, and `per_variant` requests per variant (its
    robot type's LRTrace tasks in turn), interleaved across variants.
    `robot_types`: variant -> its robot type."""
    tokenizer = load_tokenizer(default_planner_path())

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    languages = {t: load_language(t) for t in sorted(set(robot_types.values()))}
    prefixes = {t: encode(language.prompt_prefix()) for t, language in languages.items()}
    tasks = {t: [task for task in LRTRACE_TASKS if task.robot_type == t] for t in languages}
    variants = list(robot_types)
    requests = []
    for i in range(per_variant * len(variants)):
        variant = variants[i % len(variants)]
        robot_type = robot_types[variant]
        task = tasks[robot_type][i % len(tasks[robot_type])]
        request = languages[robot_type].format_request(task.scene, task.instruction)
        prompt = prefixes[robot_type] + encode(request)
        requests.append(Request(i, variant, prompt, robot_type))
    return prefixes, requests


def variant_robot_types(variants: dict[str, Path]) -> dict[str, str]:
    """Each variant's robot type: the fleet's for a shipped variant (a full fine-tune
    names its fleet variant in eval.json), drone for a random adapter."""
    fleet = load_fleet()
    types = {}
    for name, path in variants.items():
        scored = path / "eval.json"
        of = json.loads(scored.read_text())["variant"] if scored.is_file() else name
        types[name] = fleet[of].robot_type if of in fleet else "drone"
    return types


def kv_config(kv_bytes: int) -> EngineConfig:
    # no host KV: a preempted generation is recomputed, as on a device without spare RAM
    return EngineConfig(
        device_kv_bytes=max(kv_bytes, 1), host_kv_bytes=0, num_threads=1, max_generations=64
    )


def serve(
    device: Device,
    engine: TorchEngine,
    queue: list[Request],
    params: SamplingParams,
    outcome: Outcome,
    prefix_of: Callable[[Request], str],
    variant_of: Callable[[Request], str | None],
    live: dict[int, Request],
    select: Callable[[dict[int, Request]], list[int]] = list,
) -> bool:
    """One turn of `engine`: admit what fits from the head of `queue`, then one step
    of the live generations `select` picks (all of them by default). False when it
    has nothing to do."""
    while queue and len(live) < engine.max_generations:
        head = queue[0]
        prefix_id = prefix_of(head)
        if not engine.can_admit(len(head.prompt), prefix_id):
            if not live:  # nothing will ever free: this pool cannot hold the request
                outcome.refused.append(queue.pop(0).index)
                continue
            break
        queue.pop(0)
        device.run(engine.add, head.index, head.prompt, params, prefix_id, variant_of(head))
        live[head.index] = head
        outcome.tokens[head.index] = []
    if not live:
        return False
    for out in device.run(engine.step, select(live)):
        outcome.tokens[out.gen_id].append(out.token_id)
        if out.finished:
            del live[out.gen_id]
            outcome.done_s[out.gen_id] = device.now_s
    return True


def repeated(
    contenders: dict[str, Callable[[SamplingParams], Outcome]],
    params: SamplingParams,
    repeats: int,
    row: dict[str, Any],
) -> dict[str, Outcome]:
    """Each contender run `repeats` times, the contenders taking turns (so a change
    of load hits them alike), and the run of median device time kept, the others in
    its `runs`. A contender whose pool cannot hold a request beside its prefix is
    recorded in `row` as not fitting."""
    runs: dict[str, list[Outcome]] = {key: [] for key in contenders}
    for _ in range(repeats):
        for key, run in contenders.items():
            if key not in runs:
                continue
            try:
                runs[key].append(run(params))
            except (OutOfKvMemory, GenerationsFailed) as exc:  # the prefix fits, nothing else
                row[key] = {"fits": False, "why": str(exc)}
                del runs[key]
    medians = {}
    for key, outcomes in runs.items():
        ordered = sorted(outcomes, key=lambda o: o.device_s)
        medians[key] = ordered[(len(ordered) - 1) // 2]
        medians[key].runs = outcomes
    return medians


def variant_prefixes(
    requests: Sequence[Request], prefixes: dict[str, list[int]]
) -> dict[str, tuple[str, list[int]]]:
    """Each variant's robot prefix: variant -> (prefix id, tokens)."""
    return {r.variant: (r.prefix_id, prefixes[r.robot_type]) for r in requests}


def one_engine(
    planner: Path,
    adapters: dict[str, Path],
    prefixes: dict[str, list[int]],
    requests: list[Request],
    kv_bytes: int,
    params: SamplingParams,
) -> Outcome:
    device, outcome = Device(), Outcome()
    engine = TorchEngine(planner, kv_config(kv_bytes))
    for name, path in adapters.items():
        engine.load_adapter(name, path)
    for name, (prefix_id, prefix) in variant_prefixes(requests, prefixes).items():
        outcome.setup_s += timed(engine.register_prefix, prefix_id, prefix, variant=name)
    queue, live = list(requests), dict[int, Request]()
    while serve(
        device,
        engine,
        queue,
        params,
        outcome,
        lambda r: r.prefix_id,
        lambda r: r.variant,
        live,
    ):
        pass
    outcome.device_s = device.now_s
    return outcome


def per_variant_engines(
    merged: dict[str, Path],
    prefixes: dict[str, list[int]],
    requests: list[Request],
    kv_bytes_each: int,
    params: SamplingParams,
) -> Outcome:
    device, outcome = Device(), Outcome()
    engines = {name: TorchEngine(path, kv_config(kv_bytes_each)) for name, path in merged.items()}
    for name, (prefix_id, prefix) in variant_prefixes(requests, prefixes).items():
        outcome.setup_s += timed(engines[name].register_prefix, prefix_id, prefix)
    queues = {name: [r for r in requests if r.variant == name] for name in engines}
    lives: dict[str, dict[int, Request]] = {name: {} for name in engines}
    busy = True
    while busy:  # the engines take turns on the device, one step each
        busy = False
        for name, engine in engines.items():
            busy |= serve(
                device,
                engine,
                queues[name],
                params,
                outcome,
                lambda r: r.prefix_id,
                lambda r: None,
                lives[name],
            )
    outcome.device_s = device.now_s
    return outcome


def merge_per_variant(
    merged: dict[str, Path],
    switch_s: dict[str, float],
    prefixes: dict[str, list[int]],
    requests: list[Request],
    kv_bytes: int,
    params: SamplingParams,
) -> Outcome:
    """Groups in the order their first request arrived; a group's engine stands for
    the one model with that adapter merged in. `kv_bytes`: its pool, the budget less
    the other variants' prefixes it keeps (their KV stays valid for their adapter)."""
    device, outcome = Device(), Outcome()
    for name, (prefix_id, prefix) in variant_prefixes(requests, prefixes).items():
        engine = TorchEngine(merged[name], kv_config(kv_bytes))
        device.now_s += switch_s[name]  # unmerge the last adapter, merge this one
        outcome.switches += 1
        outcome.setup_s += timed(engine.register_prefix, prefix_id, prefix)
        queue, live = [r for r in requests if r.variant == name], dict[int, Request]()
        while serve(
            device, engine, queue, params, outcome, lambda r: r.prefix_id, lambda r: None, live
        ):
            pass
        del engine
    outcome.device_s = device.now_s
    return outcome


def merged_checkpoints(
    planner: Path, adapters: dict[str, Path], root: Path, repeats: int = 5
) -> tuple[dict[str, Path], dict[str, float]]:
    """Each variant as a full checkpoint (a LoRA merged; a full fine-tune is one), and
    the measured seconds of one switch to it (median of `repeats`): peft's unmerge +
    merge of a LoRA, or copying a fine-tune's own tensors into the model and back."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    merged, switch_s = {}, {}
    for name, adapter in adapters.items():
        model = AutoModelForCausalLM.from_pretrained(planner, dtype=torch.float32)
        if not (adapter / "adapter_config.json").is_file():  # a full fine-tune
            switch_s[name] = _swap_s(model, adapter, repeats)
            merged[name] = adapter
            continue
        peft_model = PeftModel.from_pretrained(model, str(adapter))
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            peft_model.merge_adapter()
            peft_model.unmerge_adapter()
            times.append(time.perf_counter() - started)
        switch_s[name] = statistics.median(times)
        out = root / name
        peft_model.merge_and_unload().save_pretrained(str(out))
        for file in TOKENIZER_FILES:
            shutil.copy(planner / file, out / file)
        merged[name] = out
    return merged, switch_s


def _swap_s(model: Any, fine_tune: Path, repeats: int) -> float:
    """Seconds to copy a full fine-tune's differing tensors into `model` and back."""
    from safetensors.torch import load_file

    params = dict(model.named_parameters())
    own = {
        key: tensor
        for key, tensor in load_file(str(fine_tune / "model.safetensors")).items()
        if key in params and not torch.equal(tensor, params[key])
    }
    kept = {key: params[key].detach().clone() for key in own}
    times = []
    with torch.no_grad():
        for _ in range(repeats):
            started = time.perf_counter()
            for key, tensor in own.items():
                params[key].copy_(tensor)
            for key, tensor in kept.items():
                params[key].copy_(tensor)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def prefix_kv_bytes(engine: TorchEngine, prefix: list[int]) -> int:
    """Device KV bytes one registered copy of `prefix` holds."""
    before = engine.memory()
    engine.register_prefix("probe", prefix)
    after = engine.memory()
    engine.unregister_prefix("probe")
    block_bytes = engine.config.device_kv_bytes // before.device_blocks_total
    return (before.device_blocks_free - after.device_blocks_free) * block_bytes


def model_bytes(path: Path) -> int:
    from safetensors.torch import load_file

    return sum(t.nbytes for t in load_file(str(path / "model.safetensors")).values())


def tuf_run(
    args: argparse.Namespace,
    eps: float,
    planner: Path,
    adapters: dict[str, Path],
    merged: dict[str, Path],
    switch_s: dict[str, float],
    one_weight_bytes: int,
    base_bytes: int,
    prefix_bytes: int,
    params: SamplingParams,
) -> dict[str, Any]:
    """Arrivals over time with urgency classes (fleet_traffic_tuf.py), one memory budget."""
    import fleet_traffic_tuf as tuf

    types = variant_robot_types(adapters)
    prefixes, requests = tuf.trace_requests(types, eps, args.tuf_duration_s, 0)
    total = int(args.tuf_memory_mb * 2**20)
    one_kv = total - one_weight_bytes
    each_kv = (total - len(merged) * base_bytes) // len(merged)
    group_kv = total - base_bytes - (len(merged) - 1) * prefix_bytes
    one = tuf.one_engine(planner, adapters, prefixes, requests, one_kv, params)
    rows = {"one_engine": tuf.utility_summary(one, requests, None)}
    first = tuf.one_engine(planner, adapters, prefixes, requests, one_kv, params, urgent_first=True)
    rows["one_engine_urgent_first"] = tuf.utility_summary(first, requests, one)
    if each_kv < prefix_bytes:
        rows["per_variant_engines"] = {"fits": False}
    else:
        try:
            separate = tuf.per_variant_engines(merged, prefixes, requests, each_kv, params)
        except (OutOfKvMemory, GenerationsFailed) as exc:  # the prefix fits, no request beside it
            rows["per_variant_engines"] = {"fits": False, "why": str(exc)}
        else:
            rows["per_variant_engines"] = tuf.utility_summary(separate, requests, one)
    grouped = tuf.merge_per_variant(merged, switch_s, prefixes, requests, group_kv, params)
    rows["merge_per_variant"] = tuf.utility_summary(grouped, requests, one)
    return {
        "events_per_s": eps,
        "duration_s": args.tuf_duration_s,
        "memory_bytes": total,
        "tasks": len(requests),
        "tasks_by_robot_type": {t: sum(r.robot_type == t for r in requests) for t in prefixes},
        "urgent_tasks": sum(r.urgency == "urgent" for r in requests),
        "last_arrival_s": max(r.arrival_s for r in requests),
        "tuf": {u: Tuf.preset(u).model_dump() for u in ("urgent", "normal")},
        "contenders": rows,
    }


def _task_kinds(tuf: dict[str, Any]) -> str:
    """'drone tasks', or 'tasks: 120 drone, 40 arm' for a fleet of several types."""
    by_type = tuf.get("tasks_by_robot_type", {"drone": tuf["tasks"]})
    if len(by_type) == 1:
        return f"{next(iter(by_type))} tasks"
    return "tasks: " + ", ".join(f"{n} {t}" for t, n in by_type.items())


def tuf_table(tuf: dict[str, Any]) -> Table:
    table = Table(
        title=f"{tuf['tasks']} {_task_kinds(tuf)} ({tuf['urgent_tasks']} urgent) arriving over "
        f"{tuf['duration_s']:g} s at {tuf['events_per_s']:g} events/s, "
        f"{tuf['memory_bytes'] / 2**20:g} MB"
    )
    columns = (
        "contender",
        "served",
        "tok/busy s",
        "urgent utility",
        "urgent p95 s",
        "normal utility",
        "normal p95 s",
        "switches",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for key, s in tuf["contenders"].items():
        if s.get("fits") is False:
            table.add_row(key, "does not fit", *[""] * 6)
            continue
        cells = [key, str(s["served"]), f"{s['tokens_per_busy_s']:.0f}"]
        for urgency in ("urgent", "normal"):
            u = s[urgency]
            cells.append(f"{u['utility_of_max']:.1%}")
            cells.append("-" if u["p95_response_s"] is None else f"{u['p95_response_s']:.2f}")
        table.add_row(*cells, str(s["variant_switches"]))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--fleet",
        choices=("drone", "shipped"),
        default="drone",
        help="drone: the shipped drone LoRA variants padded with random adapters (rank 8, "
        "every projection) to --variants; shipped: the shipped fleet, "
        "every LoRA variant and full fine-tune of both robot types",
    )
    parser.add_argument("--variants", type=int, default=8)
    parser.add_argument("--per-variant", type=int, default=4, help="requests per variant")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--repeats", type=int, default=5, help="runs per contender and budget (median kept)"
    )
    parser.add_argument(
        "--memory-mb", default="96,97,98,99,100,110,140", help="total memory budgets"
    )
    parser.add_argument("--tuf-eps", default="4,7", help="TUF runs: events per s, each ('': none)")
    parser.add_argument("--tuf-duration-s", type=float, default=10.0, help="TUF run: trace length")
    parser.add_argument("--tuf-memory-mb", type=float, default=110.0, help="TUF run: memory")
    parser.add_argument("--out", type=Path, default=None, help=f"default {RESULTS.name}")
    args = parser.parse_args(argv)
    out = args.out or (RESULTS if args.fleet == "drone" else SHIPPED_RESULTS)
    torch.set_num_threads(1)
    console = Console(width=160)
    machine = MachineRecord()
    planner = default_planner_path()
    params = SamplingParams(max_tokens=args.max_tokens)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        shipped = args.fleet == "shipped"
        adapters = variant_adapters(
            args.variants, Path(tmp) / "adapters", None if shipped else "drone", full_tunes=shipped
        )
        merged, switch_s = merged_checkpoints(planner, adapters, Path(tmp) / "merged")
        prefixes, requests = fleet_requests(variant_robot_types(adapters), args.per_variant)
        probe = TorchEngine(planner, kv_config(2**25))
        for name, path in adapters.items():
            probe.load_adapter(name, path)
        weights = probe.resident_weights()
        base_bytes = model_bytes(planner)
        prefix_bytes = max(prefix_kv_bytes(probe, prefix) for prefix in prefixes.values())
        del probe
        for memory_mb in (float(m) for m in args.memory_mb.split(",")):
            total = int(memory_mb * 2**20)
            one_kv = total - weights.total_bytes
            each_kv = (total - len(merged) * base_bytes) // len(merged)
            console.print(
                f"{memory_mb:g} MB: one engine KV {one_kv / 2**20:.1f} MB, "
                f"per-variant KV {max(each_kv, 0) / 2**20:.2f} MB each"
            )
            group_kv = total - base_bytes - (len(merged) - 1) * prefix_bytes
            contenders: dict[str, Callable[[SamplingParams], Outcome]] = {
                "one_engine": partial(one_engine, planner, adapters, prefixes, requests, one_kv),
                "merge_per_variant": partial(
                    merge_per_variant, merged, switch_s, prefixes, requests, group_kv
                ),
            }
            row: dict[str, Any] = {
                "memory_bytes": total,
                "one_engine_kv_bytes": one_kv,
                "per_variant_kv_bytes": max(each_kv, 0),
            }
            if each_kv < prefix_bytes:  # not even the robot's prompt prefix fits
                row["per_variant_engines"] = {"fits": False}
            else:
                contenders["per_variant_engines"] = partial(
                    per_variant_engines, merged, prefixes, requests, each_kv
                )
            medians = repeated(contenders, params, args.repeats, row)
            one = medians["one_engine"]
            for key, outcome in medians.items():
                row[key] = outcome.summary(requests, None if key == "one_engine" else one)
                row[key]["device_s_runs"] = [o.device_s for o in outcome.runs]
            runs.append(row)
        tufs = [
            tuf_run(
                args,
                float(eps),
                planner,
                adapters,
                merged,
                switch_s,
                weights.total_bytes,
                base_bytes,
                prefix_bytes,
                params,
            )
            for eps in args.tuf_eps.split(",")
            if eps
        ]
    result = {
        "machine": machine.done(),
        "variants": list(adapters),
        "requests": len(requests),
        "prompt_tokens": [len(r.prompt) for r in requests],
        "max_tokens": args.max_tokens,
        "base_weight_bytes": base_bytes,
        "one_engine_weight_bytes": weights.total_bytes,
        "prefix_kv_bytes": prefix_bytes,
        "switch_s": switch_s,
        "runs": runs,
        "tuf": tufs,
    }
    kinds = " and ".join(sorted(prefixes))
    table = Table(title=f"{len(requests)} {kinds} requests over {len(adapters)} variants")
    for column in (
        "memory",
        "contender",
        "served",
        "refused",
        "tok/s",
        "mean done s",
        "one engine x",
    ):
        table.add_column(column, justify="right")
    for row in runs:
        base_tps = row["one_engine"]["tokens_per_s"]
        for key in ("one_engine", "per_variant_engines", "merge_per_variant"):
            s = row[key]
            if s.get("fits") is False:
                table.add_row(f"{row['memory_bytes'] / 2**20:g} MB", key, "does not fit", *[""] * 4)
                continue
            done = s["mean_completion_s"]
            table.add_row(
                f"{row['memory_bytes'] / 2**20:g} MB",
                key,
                str(s["served"]),
                str(s["refused"]),
                f"{s['tokens_per_s']:.0f}",
                "-" if done is None else f"{done:.2f}",
                f"{base_tps / s['tokens_per_s']:.2f}x" if s["tokens_per_s"] else "-",
            )
    console.print(table)
    for tuf in tufs:
        console.print(tuf_table(tuf))
    console.print(MachineRecord.line(result["machine"]))
    out.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
