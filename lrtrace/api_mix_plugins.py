"""The API mix (api_mix.py) through the tool plugins: each call is a real call of a
plugin process (api_tools.py) through the service's ToolRouter, on the real clock.

A request's reply is the trace's sentences, each but the last ending in a call of
its class written in the plan call syntax the router parses (`qa(2)`,
`math(17, '*', 23)`). The engine is forced to that text (api_mix_torch.py), so the
router sees the call decoded, hands it to the class's validating plugin, and the
sentence's generation waits suspended until the answer is in (tool_waits.py), its
KV decided by the tool's predicted answer time: the per-(robot, tool) running
statistics (tools/answer_times.py), from the declared `expected_s` prior (or none)
and learning from every measured answer. Nothing waits after a delivered
sentence (its language's execution estimate is 0 and it is reported done at once).

Cross-process virtual time is not possible, so the service runs on the monotonic
clock and the plugins sleep the table's durations times `scale` (1/100: a chatbot
call ~0.29 s). Compute is not scaled. The calls' answers are not appended to the
context (as in api_mix.py; LAMPS appends them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lrtrace.api_mix import API_CLASSES, ApiClass, ApiRequest, request_tag, submit_request
from timely_core.clock import MonotonicClock
from timely_core.engine.paged_engine import PagedEngine
from timely_core.engine.sim.engine import Script
from timely_core.events import Segment, TaskResult
from timely_core.language.chat_language import ChatLanguage
from timely_core.language.plan_language import PlanStatement
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

DEFAULT_SCALE = 0.01  # the table's durations on the real clock
TOOL = "api"  # the one tool each class's robot has
MATH_OPS = ("+", "-", "*", "/")
START_LEAD_S = 0.05  # the first arrival, after the loop started
# a call's wall-time limit: a safety net far above any scaled duration, so that a
# loaded machine's scheduling delays do not fail calls (the default is 5 s)
WALL_S = 30.0


@dataclass(frozen=True)
class PluginLanguage(ChatLanguage):
    """Chat mode whose sentences are delivered once their call is answered: nothing
    is waited for after one (the call's wait is the tool's, predicted by its
    answer-time statistics)."""

    def estimate_execution_s(self, statements: Sequence[PlanStatement]) -> tuple[float, float]:
        return 0.0, 0.0


def call_text(api: ApiClass, index: int, rng: np.random.Generator) -> str:
    """Call `index` of a request of `api`, in plan call syntax."""
    if api.name == "math":
        a, b = (int(x) for x in rng.integers(1, 100, size=2))
        return f"math({a}, '{MATH_OPS[int(rng.integers(len(MATH_OPS)))]}', {b})"
    return f"{api.name}({index})"


def reply_text(request: ApiRequest, rng: np.random.Generator) -> str:
    """The request's sentences, each but the last ending in a call before its '.'."""
    calls = len(request.sentences) - 1
    parts = [
        f"{s[:-1]} {call_text(request.api, i, rng)}." if i < calls else s
        for i, s in enumerate(request.sentences)
    ]
    return " ".join(parts)


def pool_robots(api: str, pool: int) -> list[str]:
    """The robot ids serving class `api`: its name alone for a pool of one."""
    return [api] if pool == 1 else [f"{api}{k}" for k in range(pool)]


def tool_spec(api: ApiClass, scale: float, seed: int, prior: bool) -> dict[str, Any]:
    """The class's plugin; `prior`: declare the table's mean (scaled) as `expected_s`."""
    spec: dict[str, Any] = {"name": TOOL, "wall_s": WALL_S}
    if api.name == "math":  # computes: its time is the IPC's and the arithmetic's
        spec["plugin"] = "lrtrace.api_tools:MathTool"
    else:
        spec["plugin"] = "lrtrace.api_tools:ApiTool"
        mean, std = api.duration_s
        spec["options"] = {"api": api.name, "mean_s": mean, "std_s": std, "scale": scale,
                           "seed": seed}  # fmt: skip
    if prior:
        spec["expected_s"] = api.duration_s[0] * scale
    return spec


@dataclass
class PluginOutcome:
    request: ApiRequest
    text: str  # the reply the engine is forced to
    arrival_s: float  # service clock
    result: TaskResult | None = None
    done_s: float | None = None

    @property
    def calls(self) -> int:
        return len(self.request.sentences) - 1


@dataclass
class ToolConvergence:
    """One class's answer-time prediction against its measured answers."""

    api: str
    prior_s: float | None
    predicted_s: list[float | None]  # the prediction at each delivered call, in order
    final_s: float | None  # the running statistics' prediction at the end (pool's mean)
    samples: int  # answers measured, over the pool
    measured_mean_s: float  # of the answers (sent -> reply), from the tool outcomes
    table_mean_s: float  # the table's mean times the scale


@dataclass
class PluginRun:
    outcomes: list[PluginOutcome]
    service: PlanningService
    engine: PagedEngine
    makespan_s: float
    counts: dict[str, int] = field(default_factory=dict)  # KV decisions
    tools: dict[str, ToolConvergence] = field(default_factory=dict)

    def e2e_s(self) -> list[float]:
        return [o.done_s - o.arrival_s for o in self.outcomes if o.done_s is not None and _ok(o)]

    def ttft_s(self) -> list[float]:
        return [o.result.ttft_s for o in self.outcomes if o.result is not None and o.result.ttft_s]


def _ok(outcome: PluginOutcome) -> bool:
    return outcome.result is not None and outcome.result.success


def run_plugin_mix(
    requests: Sequence[ApiRequest],
    policy: str,
    tokenizer: Any,
    engine_factory: Callable[[Script], PagedEngine],
    scale: float = DEFAULT_SCALE,
    seed: int = 0,
    priors: bool = True,
    config: ServiceConfig | None = None,
    max_batch_size: int = 8,
    timeout_s: float = 600.0,
    tools: dict[str, dict[str, Any]] | None = None,
    replies: dict[str, str] | None = None,
    pool: int = 1,
) -> PluginRun:
    """Serve `requests` under `policy` on the real clock, each call answered by its
    class's plugin process. `engine_factory(script)`: an engine producing
    `script`'s tokens. `tools`: specs replacing a class's (by class name);
    `replies`: texts replacing requests' composed replies (by request id).
    `pool`: robots (each with its plugin process) per class, taking the class's
    requests in turn: a plugin process answers one call at a time, so one process
    per class is a single server whose answers queue under load."""
    if pool < 1:
        raise ValueError(f"pool must be at least 1, got {pool}")
    rng = np.random.default_rng(seed)
    texts = {r.request_id: reply_text(r, rng) for r in requests} | (replies or {})

    def script(prompt_ids: Sequence[int]) -> list[int]:
        tag = request_tag(tokenizer.decode(list(prompt_ids)))
        ids: list[int] = tokenizer.encode(texts[tag], add_special_tokens=False).ids
        return ids

    engine = engine_factory(script)
    clock = MonotonicClock()
    config = (config or ServiceConfig()).model_copy(
        update={
            "max_queue": len(requests) + 1,
            "max_tokens": 8192,
            "max_segment_tokens": 512,
            "max_batch_size": max_batch_size,
            "grammar": False,
        }
    )
    service = PlanningService(engine, tokenizer, policy=policy, clock=clock, config=config)
    try:
        return _serve(service, engine, requests, texts, scale, seed, priors, timeout_s, tools, pool)
    finally:
        service.stop()
        service.close_tools()


def _serve(
    service: PlanningService,
    engine: PagedEngine,
    requests: Sequence[ApiRequest],
    texts: dict[str, str],
    scale: float,
    seed: int,
    priors: bool,
    timeout_s: float,
    tools: dict[str, dict[str, Any]] | None,
    pool: int,
) -> PluginRun:
    predicted: dict[str, list[float | None]] = {api.name: [] for api in API_CLASSES}
    priors_s: dict[str, float | None] = {}
    for api in API_CLASSES:
        spec = (tools or {}).get(api.name) or tool_spec(api, scale, seed, priors)
        for robot in pool_robots(api.name, pool):
            service.register_robot(robot, PluginLanguage(robot_type=f"api-{api.name}"))
            service.register_tool(robot, spec)
        priors_s[api.name] = service.tool_answer_stats(robot, TOOL).prior_s
    taken = {api.name: 0 for api in API_CLASSES}
    robots: dict[str, str] = {}  # by request id
    for r in requests:
        robots[r.request_id] = pool_robots(r.api.name, pool)[taken[r.api.name] % pool]
        taken[r.api.name] += 1
    finished = threading.Event()
    lock = threading.Lock()
    service.start()
    t0 = service.clock.now() + START_LEAD_S
    outcomes = [PluginOutcome(r, texts[r.request_id], t0 + r.arrival_s) for r in requests]
    pending = len(outcomes)

    def on_segment(outcome: PluginOutcome) -> Callable[[Segment], None]:
        def delivered(segment: Segment) -> None:
            if segment.index < outcome.calls:  # its call was answered: the prediction now
                robot = robots[outcome.request.request_id]
                expected = service.tool_answer_stats(robot, TOOL).expected_s
                predicted[outcome.request.api.name].append(expected)
            service.segment_done(segment.task_id, segment.index)

        return delivered

    def on_result(outcome: PluginOutcome) -> Callable[[TaskResult], None]:
        def ended(result: TaskResult) -> None:
            nonlocal pending
            outcome.result, outcome.done_s = result, service.clock.now()
            with lock:
                pending -= 1
                if not pending:
                    finished.set()

        return ended

    for outcome in outcomes:
        r = outcome.request
        submit_request(
            service,
            r,
            outcome.arrival_s,
            robots[r.request_id],
            on_segment(outcome),
            on_result(outcome),
        )
    if not finished.wait(timeout_s):
        raise TimeoutError(f"{pending} of {len(outcomes)} requests not done in {timeout_s} s")
    service.stop()
    done = [o.done_s for o in outcomes if o.done_s is not None]
    makespan = max(done) - outcomes[0].arrival_s
    convergence = {
        api.name: _convergence(
            service, api, outcomes, predicted[api.name], scale, priors_s[api.name], pool
        )
        for api in API_CLASSES
    }
    counts = dict(service._state.kv_handling.counts)
    return PluginRun(outcomes, service, engine, makespan, counts, convergence)


def _convergence(
    service: PlanningService,
    api: ApiClass,
    outcomes: list[PluginOutcome],
    predicted: list[float | None],
    scale: float,
    prior_s: float | None,
    pool: int,
) -> ToolConvergence:
    answers = [
        o.replied_s - o.sent_s
        for outcome in outcomes
        if outcome.request.api is api
        for o in service.tool_outcomes(outcome.request.request_id)
    ]
    stats = [service.tool_answer_stats(robot, TOOL) for robot in pool_robots(api.name, pool)]
    finals = [s.expected_s for s in stats if s.expected_s is not None]
    table = api.duration_s[0] * scale
    return ToolConvergence(
        api=api.name,
        prior_s=prior_s,
        predicted_s=predicted,
        final_s=float(np.mean(finals)) if finals else None,
        samples=sum(s.samples for s in stats),
        measured_mean_s=float(np.mean(answers)) if answers else float("nan"),
        table_mean_s=table,
    )
