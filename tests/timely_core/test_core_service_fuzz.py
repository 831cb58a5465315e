"""Random sequences of what callers do, under every policy (simulated engine,
virtual time): tasks submitted now and later, robots reporting segments done,
failed (replanned or not) or started late, tasks cancelled or failed by their
caller, robots re-registered with another prompt, scenes published, reports for
segments that do not exist. Whatever the order, a refused call raises a
ServiceError, ValueError or TypeError and changes nothing, every task ends once
its robot reports its segments, and the device KV memory comes back to the
robots' stored prefixes."""

from __future__ import annotations

import contextlib
import random
from collections import Counter

import pytest

from tests.timely_core.core_support import TinyLanguage, make_service
from timely_core.engine.protocol import HandlingStrategy
from timely_core.errors import ServiceError
from timely_core.events import Segment
from timely_core.request import TaskRequest
from timely_core.scheduling.policies.registry import POLICY_NAMES
from timely_core.scheduling.tuf import Tuf
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.task_handle import TaskHandle

PLANS = {
    "look for the cat": "mf(50); tl(90); search('cat'); say('found it');",
    "evade": "mu(30); tr(45); md(30);",
    "short": "mf(20);",
    "long": "mf(20); " * 12,
    "failed: blocked": " mf(1);",  # the replanned rest after a failure
    "failed: jam": " tr(10);",
}
INSTRUCTIONS = ("look for the cat", "evade", "short", "long")
ROBOTS = ("r0", "r1", "r2", "r3")
OTHER = TinyLanguage(prefix="Skills: mu(cm) up, md(cm) down, tr(deg) turn right, say(t).\n")
SEEDS = 300
REFUSED = (ServiceError, ValueError, TypeError)


def _config(rng: random.Random, policy: str) -> ServiceConfig:
    settings: dict[str, object] = {"max_queue": rng.choice([3, 64])}
    if policy not in ("lamps", "infercept", "vllm-like") and rng.random() < 0.5:
        settings["handling_strategy"] = rng.choice(list(HandlingStrategy)).value
    return ServiceConfig.model_validate(settings)


def _request(rng: random.Random) -> TaskRequest:
    return TaskRequest(
        robot_id=rng.choice(ROBOTS),
        instruction=rng.choice(INSTRUCTIONS),
        tuf=rng.choice([Tuf.normal(), Tuf.urgent()]),
        replan_on_failure=rng.random() < 0.5,
        result_after_reports=rng.random() < 0.3,
    )


def _act(rng: random.Random, service: PlanningService, handles: list[TaskHandle]) -> None:
    """One thing a caller does (refusals raised as they come)."""
    clock = service.clock
    roll = rng.random()
    if roll < 0.3 or not handles:
        at_s = clock.now() + rng.random() if rng.random() < 0.3 else None
        request = _request(rng)
        handles.append(
            service.submit(request) if at_s is None else service.submit_at(at_s, request)
        )
        return
    if roll < 0.55:
        service.run_until(clock.now() + rng.choice([0.001, 0.01, 0.1, 1.0]))
        return
    handle = rng.choice(handles)
    delivered = [segment.index for segment in _delivered(handle)]
    index = rng.choice(delivered) if delivered and rng.random() < 0.9 else rng.randint(-1, 5)
    action = rng.random()
    if action < 0.45:
        handle.segment_done(index)
    elif action < 0.6:
        handle.segment_failed(index, rng.choice(["blocked", "jam"]))
    elif action < 0.7:
        handle.cancel()
    elif action < 0.78:
        handle.fail("robot lost")
    elif action < 0.85:
        handle.segment_started(index)
    elif action < 0.92:
        service.register_robot(rng.choice(ROBOTS), rng.choice([TinyLanguage(), OTHER]))
    else:
        service.publish_scene(rng.choice(ROBOTS), rng.choice(["", "a cat", "a dog on a mat"]))


def _delivered(handle: TaskHandle) -> list[Segment]:
    """The segments delivered so far (not withdrawn), without waiting for more."""
    out: list[Segment] = []
    with contextlib.suppress(TimeoutError):  # none more yet
        out.extend(handle.segments(timeout_s=0))
    return out


def _drain(service: PlanningService, handles: list[TaskHandle]) -> None:
    """Run on, the robots reporting every delivered segment done."""
    for _ in range(200):
        service.run_until_idle()
        open_tasks = [h for h in handles if not h.done()]
        if not open_tasks:
            return
        for handle in open_tasks:
            for segment in _delivered(handle):
                with contextlib.suppress(*REFUSED):  # reported already, or withdrawn
                    handle.segment_done(segment.index)


def _run(seed: int, seen: Counter[str]) -> None:
    rng = random.Random(seed)
    policy = rng.choice(POLICY_NAMES)
    service, _, engine = make_service(
        PLANS, policy=policy, robots=ROBOTS, config=_config(rng, policy)
    )
    handles: list[TaskHandle] = []
    for _ in range(rng.randint(5, 80)):
        try:
            _act(rng, service, handles)
        except REFUSED as refused:
            seen[type(refused).__name__] += 1
    _drain(service, handles)
    where = f"seed {seed}, policy {policy}"
    assert [h.task_id for h in handles if not h.done()] == [], where
    stats = service.stats()
    assert (stats.running, stats.queued, stats.suspended, stats.pending_arrivals) == (0,) * 4
    memory = engine.memory()
    assert memory.device_blocks_free == memory.device_blocks_total - memory.pinned_prefix_blocks
    ended = stats.succeeded + stats.failed + stats.cancelled
    assert ended <= stats.submitted <= ended + stats.rejected, where  # rejected on arrival
    for name in ("succeeded", "failed", "cancelled", "rejected", "rollbacks"):
        seen[name] += getattr(stats, name)
    seen["internal errors"] += sum("internal error" in h.result(timeout_s=0).error for h in handles)


@pytest.mark.parametrize("first", range(0, SEEDS, 100))
def test_random_caller_sequences_end_every_task_and_free_the_kv(first: int) -> None:
    seen: Counter[str] = Counter()
    for seed in range(first, first + 100):
        _run(seed, seen)
    assert seen["internal errors"] == 0
    # the sequences reached what they are meant to exercise
    for what in ("succeeded", "failed", "cancelled", "rollbacks", "ValueError", "TaskFinished"):
        assert seen[what] > 0, (what, seen)
