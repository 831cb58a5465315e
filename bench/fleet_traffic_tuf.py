"""The TUF part of bench/fleet_traffic.py: tasks arriving over time (an LRTrace trace
composed from a workload spec: Poisson events of 1..MaxTPE tasks, the traces of the
fleet's robot types with their urgency classes: drones 1-8, arms 9-11), each agent
tagged with a variant of its type, served by the three contenders of fleet_traffic.py
on one device clock; each task's utility is its TUF (Eq. 1, `Tuf.preset(urgency)`) at
its response time.

The robot acts on a whole plan here (no streamed segments), so a task's response time
is arrival -> its plan's last token. Every contender admits from its queue urgent
first, then by arrival (the same rule for all); the device clock advances by measured
engine calls, and jumps to the next arrival when a contender has nothing to do.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet_traffic import Device, Outcome, Request, kv_config, serve, variant_prefixes

from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.workload import WorkloadSpec
from robot_models.checkpoints import default_planner_path
from robot_models.language import load_language
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.loader import load_tokenizer
from timely_core.scheduling.tuf import Tuf

MAX_TPE = 8  # tasks per event, at most


@dataclass
class Arrival(Request):
    arrival_s: float = 0.0
    urgency: str = "normal"
    trace_id: int = 0


class Clock(Device):
    """The device clock, with the time it was busy (idle jumps excluded), and what a
    contender served."""

    def __init__(self) -> None:
        super().__init__()
        self.busy_s = 0.0
        self.outcome = Outcome()

    def run(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        before = self.now_s
        try:
            return super().run(call, *args, **kwargs)
        finally:
            self.busy_s += self.now_s - before


def trace_requests(
    robot_types: dict[str, str], eps: float, duration_s: float, seed: int
) -> tuple[dict[str, list[int]], list[Arrival]]:
    """Each robot type's prefix and the composed trace's tasks as requests.
    `robot_types`: variant -> its robot type. Each type gets 2 agents per variant of
    the type with the most (the same count for every type; at least an event's most
    tasks, which need distinct agents), agent n of a type on its variant (n - 1) mod
    the type's variants."""
    catalog = load_catalog()
    of_type: dict[str, list[str]] = {}
    for variant, robot_type in robot_types.items():
        of_type.setdefault(robot_type, []).append(variant)
    traces = tuple(i for i in catalog.ids() if catalog[i].robot_type in of_type)
    spec = WorkloadSpec(
        name="fleet-" + "-".join(sorted(of_type)),
        eps=eps,
        max_tpe=MAX_TPE,
        trace_ids=traces,
        agents=max(MAX_TPE, 2 * max(len(v) for v in of_type.values())),
        duration_s=duration_s,
        seed=seed,
    )
    trace = compose(spec, catalog)
    tokenizer = load_tokenizer(default_planner_path())
    languages = {t: load_language(t) for t in of_type}

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    prefixes = {t: encode(language.prompt_prefix()) for t, language in languages.items()}
    requests = []
    for i, task in enumerate(trace.tasks):
        robot_type = catalog[task.trace_id].robot_type
        agent = int(task.agent_id.removeprefix(robot_type))
        language = languages[robot_type]
        request = language.format_request(task.scene, task.instruction)
        prompt = prefixes[robot_type] + encode(request)
        variants = of_type[robot_type]
        variant = variants[(agent - 1) % len(variants)]
        requests.append(
            Arrival(
                i,
                variant,
                prompt,
                robot_type,
                arrival_s=task.arrival_s,
                urgency=task.urgency,
                trace_id=task.trace_id,
            )
        )
    return prefixes, requests


def _key(r: Arrival) -> tuple[int, float]:
    return (0 if r.urgency == "urgent" else 1, r.arrival_s)


def _release(
    pending: list[Arrival], now_s: float, queue_of: Callable[[Arrival], list[Request]]
) -> None:
    """Move the arrived requests (`pending` is sorted by arrival) into their queues."""
    while pending and pending[0].arrival_s <= now_s:
        r = pending.pop(0)
        queue = queue_of(r)
        queue.append(r)
        queue.sort(key=_key)  # type: ignore[arg-type]


def one_engine(
    planner: Path,
    adapters: dict[str, Path],
    prefixes: dict[str, list[int]],
    requests: list[Arrival],
    kv_bytes: int,
    params: SamplingParams,
    urgent_first: bool = False,
) -> Clock:
    """`urgent_first`: while urgent generations are live, an iteration runs only them
    (a TUF-aware batch); otherwise every live generation, in mixed batches."""
    engine = TorchEngine(planner, kv_config(kv_bytes))
    for name, path in adapters.items():
        engine.load_adapter(name, path)
    return serve_variants(engine, prefixes, requests, params, urgent_first)


def serve_variants(
    engine: Any,
    prefixes: dict[str, list[int]],
    requests: list[Arrival],
    params: SamplingParams,
    urgent_first: bool = False,
) -> Clock:
    """One engine with the variants loaded (torch, or vLLM's multi-LoRA) serving the
    trace: each variant's robot prefix registered, then mixed batches."""
    clock = Clock()
    select = _urgent_first if urgent_first else list
    for name, (prefix_id, prefix) in variant_prefixes(requests, prefixes).items():
        engine.register_prefix(prefix_id, prefix, variant=name)
    pending = sorted(requests, key=lambda r: r.arrival_s)
    queue: list[Request] = []
    live: dict[int, Request] = {}
    while pending or queue or live:
        _release(pending, clock.now_s, lambda r: queue)
        if not queue and not live:
            clock.now_s = pending[0].arrival_s
            continue
        serve(
            clock,
            engine,
            queue,
            params,
            clock.outcome,
            lambda r: r.prefix_id,
            lambda r: r.variant,
            live,
            select,
        )
    return clock


def _urgent_first(live: dict[int, Request]) -> list[int]:
    urgent = [i for i, r in live.items() if isinstance(r, Arrival) and r.urgency == "urgent"]
    return urgent or list(live)


def per_variant_engines(
    merged: dict[str, Path],
    prefixes: dict[str, list[int]],
    requests: list[Arrival],
    kv_bytes_each: int,
    params: SamplingParams,
) -> Clock:
    clock = Clock()
    engines = {name: TorchEngine(path, kv_config(kv_bytes_each)) for name, path in merged.items()}
    for name, (prefix_id, prefix) in variant_prefixes(requests, prefixes).items():
        engines[name].register_prefix(prefix_id, prefix)
    queues: dict[str, list[Request]] = {name: [] for name in engines}
    lives: dict[str, dict[int, Request]] = {name: {} for name in engines}
    pending = sorted(requests, key=lambda r: r.arrival_s)
    while pending or any(queues.values()) or any(lives.values()):
        busy = False
        for name, engine in engines.items():  # the engines take turns, one step each
            _release(pending, clock.now_s, lambda r: queues[r.variant])
            busy |= serve(
                clock,
                engine,
                queues[name],
                params,
                clock.outcome,
                lambda r: r.prefix_id,
                lambda r: None,
                lives[name],
            )
        if not busy and not any(queues.values()) and pending:
            clock.now_s = max(clock.now_s, pending[0].arrival_s)
    return clock


def merge_per_variant(
    merged: dict[str, Path],
    switch_s: dict[str, float],
    prefixes: dict[str, list[int]],
    requests: list[Arrival],
    kv_bytes: int,
    params: SamplingParams,
) -> Clock:
    """One merged model at a time: it serves its variant's queue until that is empty
    and nothing of it runs, then switches (the measured unmerge + merge) to the
    variant whose head request comes first (urgent, then oldest). Each engine stands
    for the one model with that adapter merged; their KV pools are the one pool."""
    clock = Clock()
    engines = {name: TorchEngine(path, kv_config(kv_bytes)) for name, path in merged.items()}
    # each variant's prefix is kept across switches
    for name, (prefix_id, prefix) in variant_prefixes(requests, prefixes).items():
        engines[name].register_prefix(prefix_id, prefix)
    queues: dict[str, list[Request]] = {name: [] for name in engines}
    current: str | None = None
    live: dict[int, Request] = {}
    pending = sorted(requests, key=lambda r: r.arrival_s)
    while pending or any(queues.values()) or live:
        _release(pending, clock.now_s, lambda r: queues[r.variant])
        if current is None or (not live and not queues[current]):
            waiting = [q[0] for q in queues.values() if q]
            if not waiting:
                clock.now_s = pending[0].arrival_s
                continue
            head = min(waiting, key=lambda r: _key(r))  # type: ignore[arg-type]
            if head.variant != current:
                current = head.variant
                clock.now_s += switch_s[current]
                clock.busy_s += switch_s[current]
                clock.outcome.switches += 1
        serve(
            clock,
            engines[current],
            queues[current],
            params,
            clock.outcome,
            lambda r: r.prefix_id,
            lambda r: None,
            live,
        )
    return clock


def utility_summary(
    clock: Clock, requests: list[Arrival], reference: Clock | None
) -> dict[str, Any]:
    """Throughput over busy device time, and per urgency class the mean TUF utility
    (of its maximum) and response times; a task never served has utility 0."""
    out = clock.outcome
    generated = sum(len(t) for t in out.tokens.values())
    row: dict[str, Any] = {
        "served": len(out.done_s),
        "refused": len(out.refused),
        "generated_tokens": generated,
        "busy_s": clock.busy_s,
        "span_s": clock.now_s,
        "tokens_per_busy_s": generated / clock.busy_s if clock.busy_s else 0.0,
        "variant_switches": out.switches,
    }
    if reference is not None:
        ref = reference.outcome.tokens
        row["tokens_equal_one_engine"] = sum(
            out.tokens.get(r.index) == ref.get(r.index) for r in requests
        )
    for urgency in ("urgent", "normal"):
        tuf = Tuf.preset(urgency)
        mine = [r for r in requests if r.urgency == urgency]
        responses = [out.done_s[r.index] - r.arrival_s for r in mine if r.index in out.done_s]
        utilities = [tuf.utility(t) for t in responses] + [0.0] * (len(mine) - len(responses))
        row[urgency] = {
            "tasks": len(mine),
            "mean_utility": statistics.fmean(utilities) if utilities else None,
            "utility_of_max": statistics.fmean(utilities) / tuf.initial_utility
            if utilities
            else None,
            "mean_response_s": statistics.fmean(responses) if responses else None,
            "p95_response_s": _p95(responses),
        }
    return row


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
