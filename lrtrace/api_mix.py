"""An API-augmented chat workload in the shape of LAMPS's Table 2 (the INFERCEPT
classes), served in chat mode on the simulator, in virtual time.

Each request belongs to one API class: its reply is a run of sentences, each but
the last ending in a call of that class (a calculator, a QA lookup, a virtual
environment step, a chatbot, an image or a TTS model) whose duration is drawn
from the class's (mean, std); the number of calls too. The service sees a call
as the wait after a segment: the generation is suspended when the sentence is
delivered, and `segment_done` reports the call's end. Predicted waits come from
the class (LAMPS: durations of one API type have low variance): its language's
`estimate_execution_s` is the class mean, refined by the reports. The calls'
responses are not appended to the context (a simplification: LAMPS adds them).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from timely_core.clock import VirtualClock
from timely_core.engine.paged_engine import PagedEngine
from timely_core.engine.sim.engine import Script, SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.events import Segment, TaskResult
from timely_core.language.chat_language import ChatLanguage
from timely_core.language.plan_language import PlanStatement
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig


@dataclass(frozen=True)
class ApiClass:
    name: str
    duration_s: tuple[float, float]  # (mean, std) of one call
    calls: tuple[float, float]  # (mean, std) of calls per request


# LAMPS Table 2, INFERCEPT dataset: (mean, std) of call duration and of call count.
API_CLASSES = (
    ApiClass("math", (9e-5, 6e-5), (3.75, 1.3)),
    ApiClass("qa", (0.69, 0.17), (2.52, 1.73)),
    ApiClass("ve", (0.09, 0.014), (28.18, 15.2)),
    ApiClass("chatbot", (28.6, 15.6), (4.45, 1.96)),
    ApiClass("image", (20.03, 7.8), (6.91, 3.93)),
    ApiClass("tts", (17.24, 7.6), (6.91, 3.93)),
)
WORDS = ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta")


@dataclass(frozen=True)
class ApiRequest:
    request_id: str
    api: ApiClass
    arrival_s: float
    sentences: tuple[str, ...]  # the reply; a call follows each but the last
    call_s: tuple[float, ...]  # one per call


def compose_api_mix(rate_per_s: float, requests: int, seed: int) -> list[ApiRequest]:
    """Poisson arrivals at `rate_per_s`, classes uniform, each sentence (the output
    before a call, and the final answer) 4-16 words."""
    if rate_per_s <= 0 or requests < 1:
        raise ValueError(f"need a positive rate and requests, got {rate_per_s}, {requests}")
    rng = np.random.default_rng(seed)
    t = 0.0
    out: list[ApiRequest] = []
    for i in range(requests):
        t += float(rng.exponential(1.0 / rate_per_s))
        api = API_CLASSES[int(rng.integers(len(API_CLASSES)))]
        calls = max(1, round(float(rng.normal(*api.calls))))
        durations = tuple(max(float(rng.normal(*api.duration_s)), 1e-5) for _ in range(calls))
        sentences = tuple(
            " ".join(WORDS[int(w)] for w in rng.integers(len(WORDS), size=int(rng.integers(4, 17))))
            + "."
            for _ in range(calls + 1)
        )
        out.append(ApiRequest(f"r{i:05d}", api, t, sentences, durations))
    return out


@dataclass(frozen=True)
class ApiLanguage(ChatLanguage):
    """Chat mode whose segments each end in one call of `api`: the predicted wait
    after a segment is the class's mean call duration."""

    api: ApiClass = API_CLASSES[0]

    def estimate_execution_s(self, statements: Sequence[PlanStatement]) -> tuple[float, float]:
        mean = self.api.duration_s[0]
        return mean, mean


@dataclass
class ApiOutcome:
    request: ApiRequest
    result: TaskResult | None = None
    done_s: float | None = None  # when the whole reply was delivered


@dataclass
class ApiRun:
    outcomes: list[ApiOutcome]
    engine: PagedEngine  # the simulator, or `engine_factory`'s
    service: PlanningService
    makespan_s: float
    counts: dict[str, int] = field(default_factory=dict)

    def e2e_s(self) -> list[float]:
        return [o.done_s - o.request.arrival_s for o in self.outcomes if o.done_s is not None]

    def ttft_s(self) -> list[float]:
        return [
            o.result.ttft_s
            for o in self.outcomes
            if o.result is not None and o.result.ttft_s is not None
        ]


def run_api_mix(
    requests: Sequence[ApiRequest],
    policy: str,
    latency: LatencyModel,
    engine_config: SimulatedEngineConfig,
    tokenizer: Any,
    config: ServiceConfig | None = None,
    wait_noise: Callable[[float], float] | None = None,
    max_batch_size: int = 8,
    engine_factory: Callable[[VirtualClock, Script], PagedEngine] | None = None,
) -> ApiRun:
    """Serve `requests` under `policy`; each call's end is reported when it ends.
    `engine_factory(clock, script)`: the engine instead of the simulator (`latency`
    and `engine_config` then unused), one that produces `script`'s tokens and moves
    `clock` itself (api_mix_torch.py)."""
    clock = VirtualClock()
    by_tag = {r.request_id: r for r in requests}

    def script(prompt_ids: Sequence[int]) -> list[int]:
        tag = request_tag(tokenizer.decode(list(prompt_ids)))
        text = " ".join(by_tag[tag].sentences)
        ids: list[int] = tokenizer.encode(text, add_special_tokens=False).ids
        return ids

    if engine_factory is None:
        engine: PagedEngine = SimulatedEngine(clock, latency, script, engine_config)
    else:
        engine = engine_factory(clock, script)
    config = (config or ServiceConfig()).model_copy(
        update={
            "max_queue": len(requests) + 1,
            "max_tokens": 8192,  # a VE reply of 60 calls is ~3,000 tokens
            "max_segment_tokens": 512,
            "max_batch_size": max_batch_size,
            "grammar": False,
        }
    )
    service = PlanningService(engine, tokenizer, policy=policy, clock=clock, config=config)
    service._state.kv_handling.wait_noise = wait_noise  # the misprediction study
    for api in API_CLASSES:
        service.register_robot(api.name, ApiLanguage(robot_type=f"api-{api.name}", api=api))
    outcomes = [ApiOutcome(r) for r in requests]
    ends: list[tuple[float, int, str, int]] = []
    order = 0

    def on_segment(outcome: ApiOutcome) -> Callable[[Segment], None]:
        def called(segment: Segment) -> None:
            nonlocal order
            calls = outcome.request.call_s
            duration = calls[segment.index] if segment.index < len(calls) else 0.0
            order += 1
            heapq.heappush(
                ends, (segment.emitted_at_s + duration, order, segment.task_id, segment.index)
            )

        return called

    def on_result(outcome: ApiOutcome) -> Callable[[TaskResult], None]:
        def finished(result: TaskResult) -> None:
            outcome.result, outcome.done_s = result, clock.now()

        return finished

    for outcome in outcomes:
        r = outcome.request
        submit_request(service, r, r.arrival_s, r.api.name, on_segment(outcome), on_result(outcome))
    _drive(service, clock, outcomes, ends)
    done = [o.done_s for o in outcomes if o.done_s is not None]
    makespan = (max(done) - requests[0].arrival_s) if done else math.nan
    return ApiRun(outcomes, engine, service, makespan, dict(service._state.kv_handling.counts))


def submit_request(
    service: PlanningService,
    request: ApiRequest,
    arrival_s: float,
    robot_id: str,
    on_segment: Callable[[Segment], None],
    on_result: Callable[[TaskResult], None],
) -> None:
    """Submit `request` to `robot_id`, arriving at `arrival_s` on the service's clock,
    with its hooks (every API mix submits this way; they differ in clock and robots).
    The instruction names the request so that the engine's script can tell, from the
    prompt alone (`request_tag`), which reply to produce."""
    handle = service.submit_at(
        arrival_s,
        TaskRequest(
            robot_id=robot_id,
            task_id=request.request_id,
            instruction=f"request {request.request_id}: use the {request.api.name} tool",
        ),
    )
    handle.on_segment(on_segment)
    handle.on_result(on_result)


def request_tag(prompt: str) -> str:
    """The request id `submit_request` wrote in the last instruction of `prompt`."""
    return prompt[prompt.rindex("request r") + len("request ") :].split(":", 1)[0]


def _drive(
    service: PlanningService,
    clock: VirtualClock,
    outcomes: list[ApiOutcome],
    ends: list[tuple[float, int, str, int]],
    step_s: float = 0.01,
    limit_s: float = 36_000.0,
) -> None:
    """Run until every request has its result, reporting each call's end. While
    any generation is live, time moves in steps of at most `step_s`, so that a
    call's end is reported when it comes; when none is, to the next event."""
    arrivals = sorted(o.request.arrival_s for o in outcomes)
    while any(o.done_s is None for o in outcomes) and clock.now() < limit_s:
        now = clock.now()
        upcoming = [a for a in arrivals if a > now][:1]
        events = [ends[0][0]] if ends else []
        stats = service.stats()
        if stats.running + stats.queued:
            events.append(now + step_s)
        events += upcoming
        if not events:
            break  # nothing live, no call out, no arrival to come
        target = max(min(events), now)
        service.run_until(target)
        clock.sleep_until(target)
        while ends and ends[0][0] <= clock.now():
            at_s, _, task_id, index = heapq.heappop(ends)
            service.segment_done(task_id, index, finished_at_s=at_s)
