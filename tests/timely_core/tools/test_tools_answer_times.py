"""Per (robot, tool) answer-time statistics: the spec's `expected_s` is the prior
until a reply is measured; each reply of a real tool process refines them; a bad
`expected_s` is rejected naming the field."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.timely_core.core_support import make_service
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.tools.answer_times import DEFAULT_ANSWER_CV, AnswerTimes

HERE = str(Path(__file__).parent)
PLANS = {"find the keys": "mf(50); search('keys'); say('found it');"}
SLOW_S, FAST_S = 0.3, 0.01


def timed(name: str, delay_s: float, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "plugin": "tools_timed_plugins:TimedLook",
        "options": {"delay_s": delay_s},
        **extra,
    }


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[PlanningService]:
    monkeypatch.syspath_prepend(HERE)
    service, _, _ = make_service(PLANS, robots=("drone1", "drone2"))
    yield service
    service.close_tools()


def find_keys(service: PlanningService, robot: str, task_id: str) -> None:
    handle = service.submit(
        TaskRequest(robot_id=robot, instruction="find the keys", task_id=task_id)
    )
    service.run_until_idle()
    assert handle.result(timeout_s=0).success


def test_replies_refine_the_declared_prior_per_robot_and_tool(service: PlanningService) -> None:
    service.register_tool("drone1", timed("look", SLOW_S, expected_s=5.0))
    service.register_tool("drone2", timed("look", FAST_S))
    assert service.tool_answer_stats("drone1", "look").expected_s == 5.0  # the prior
    assert service.tool_answer_stats("drone2", "look").expected_s is None  # none declared
    for i in range(3):
        find_keys(service, "drone1", f"slow{i}")
    slow = service.tool_answer_stats("drone1", "look")
    assert slow.samples == 3  # one `search` call per task, each reply measured
    assert slow.expected_s is not None
    assert SLOW_S <= slow.expected_s < 5.0  # measured: at least its sleep, not the prior
    assert slow.cv != DEFAULT_ANSWER_CV  # three replies: the spread is measured
    assert service.tool_answer_stats("drone2", "look").samples == 0  # another robot's
    find_keys(service, "drone2", "fast")
    fast = service.tool_answer_stats("drone2", "look")
    assert fast.samples == 1 and fast.expected_s is not None and fast.expected_s >= FAST_S
    assert fast.cv == DEFAULT_ANSWER_CV  # one reply: the assumed spread


def test_registering_again_starts_over_from_the_new_prior(service: PlanningService) -> None:
    service.register_tool("drone1", timed("look", FAST_S))
    find_keys(service, "drone1", "a")
    assert service.tool_answer_stats("drone1", "look").samples == 1
    service.register_tool("drone1", timed("look", FAST_S, expected_s=2.0))
    stats = service.tool_answer_stats("drone1", "look")
    assert (stats.samples, stats.expected_s) == (0, 2.0)
    service.unregister_tool("drone1", "look")
    assert service.tool_answer_stats("drone1", "look").expected_s is None


@pytest.mark.parametrize("bad", [0, -1.0, "soon", math.nan, math.inf, 7200])
def test_a_bad_expected_s_is_rejected_naming_the_field(
    service: PlanningService, bad: object
) -> None:
    with pytest.raises(ValidationError, match="expected_s"):
        service.register_tool("drone1", timed("look", FAST_S, expected_s=bad))
    with pytest.raises(KeyError):  # nothing was registered
        service.unregister_tool("drone1", "look")


def test_running_mean_and_spread_follow_the_measured_durations() -> None:
    times = AnswerTimes()
    times.declare("r", "t", 1.0)
    times.observe("r", "t", 2.0)  # the first reply replaces the prior
    assert times.expected_s("r", "t") == 2.0
    times.observe("r", "t", 3.0)
    times.observe("r", "t", 3.0)
    stats = times.stats("r", "t")
    assert stats.expected_s == pytest.approx(2.0 + 0.2 * 1.0 + 0.2 * 0.8)
    assert 0 < stats.cv < 1
    same = AnswerTimes()
    for _ in range(5):
        same.observe("r", "t", 0.5)
    assert same.stats("r", "t").cv == 0.0  # an API whose durations never vary
    with pytest.raises(ValueError, match="tool 't': answer time must be >= 0 s"):
        times.observe("r", "t", -0.1)
