"""Capacity planning: the boundary search, the target, the planner on the simulator
and `lrtrace capacity` end to end. Replays run in virtual time and are seeded, so
capacities are deterministic and compare exactly; no wall-clock time is asserted."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from lrtrace.capacity_search import find_boundary
from lrtrace.capacity_target import CapacityTarget, ClassValue, class_values, meets
from lrtrace.results_format import SegmentRecord, TaskRecord
from timely_core.scheduling.tuf import Tuf

# -- the search ---------------------------------------------------------------------


class Monotone:
    """A synthetic test that passes up to `boundary` and records what was asked."""

    def __init__(self, boundary: int) -> None:
        self.boundary = boundary
        self.asked: list[int] = []

    def __call__(self, n: int) -> bool:
        self.asked.append(n)
        return n <= self.boundary


@pytest.mark.parametrize("start", [1, 3, 16, 64, 100])
def test_search_finds_the_exact_boundary_of_a_monotone_test(start: int) -> None:
    limit = 100
    for boundary in range(limit + 1):
        test = Monotone(boundary)
        found = find_boundary(test, start, limit)
        assert found.passed == boundary
        assert found.failed == (None if boundary == limit else boundary + 1)
        assert found.at_limit == (boundary == limit)
        asked = test.asked
        assert len(asked) == len(set(asked)) and all(1 <= n <= limit for n in asked)
        assert len(asked) <= 2 * math.ceil(math.log2(limit)) + 2
        assert found.tried == {n: n <= boundary for n in asked}


def test_search_precision_stops_within_its_resolution() -> None:
    for boundary in (0, 5, 99, 400, 999):
        exact, coarse = Monotone(boundary), Monotone(boundary)
        find_boundary(exact, 10, 1000)
        found = find_boundary(coarse, 10, 1000, precision=0.1)
        assert found.passed <= boundary < (found.failed or math.inf)
        assert found.failed is not None
        assert found.failed - found.passed <= max(1, int(0.1 * found.passed))
        assert len(coarse.asked) <= len(exact.asked)
    assert find_boundary(Monotone(2000), 1, 1000, 0.1).passed == 1000


def test_search_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="limit"):
        find_boundary(lambda n: True, 1, 0)
    with pytest.raises(ValueError, match="precision"):
        find_boundary(lambda n: True, 1, 10, precision=1.0)


# -- the target ---------------------------------------------------------------------


def record(urgency: str, response_s: float | None, n: int) -> TaskRecord:
    """A drone task whose first action started `response_s` after arrival (None: it
    never completed)."""
    segments = []
    if response_s is not None:
        segments = [
            SegmentRecord(
                index=0,
                text="x",
                statements=1,
                emitted_s=response_s - 0.008,
                dispatched_s=response_s,
                exec_start_s=response_s,
                exec_end_s=response_s + 2.0,
            )
        ]
    done = response_s is not None
    return TaskRecord(
        task_id=f"t{n}",
        trace_id=6 if urgency == "urgent" else 1,
        agent_id="drone1",
        robot_type="drone",
        urgency="urgent" if urgency == "urgent" else "normal",
        tuf=Tuf.preset("urgent" if urgency == "urgent" else "normal"),
        arrival_s=0.0,
        segments=segments,
        finished=done,
        success=done,
    )


def test_full_utility_means_a_response_within_the_ert_and_incomplete_tasks_count() -> None:
    urgent = [0.1, 0.2, 0.2001, None]  # ERT 0.2 s: the first two are at full utility
    normal = [0.5, 1.25, None]  # utilities 1, 0.5 (alpha -2 past 1 s), 0
    values = class_values(
        [record("urgent", r, i) for i, r in enumerate(urgent)]
        + [record("normal", r, 10 + i) for i, r in enumerate(normal)]
    )
    assert set(values) == {"urgent-drone", "normal-drone"}
    u, n = values["urgent-drone"], values["normal-drone"]
    assert (u.tasks, u.completed, u.value) == (4, 3, 0.5)
    assert (n.tasks, n.completed) == (3, 2)
    assert n.value == pytest.approx(1.5 / 3) and n.mean_utility == pytest.approx(0.5)


def cv(cls: str, value: float) -> ClassValue:
    return ClassValue(cls, cls.split("-")[0], 10, 10, value, value)


def test_rules_median_and_all() -> None:
    target = CapacityTarget()  # 95% urgent at full utility, normal at 90% of max
    seeds = [
        {"urgent-drone": cv("urgent-drone", 0.96), "normal-drone": cv("normal-drone", 0.91)},
        {"urgent-drone": cv("urgent-drone", 0.90), "normal-drone": cv("normal-drone", 0.99)},
        {"urgent-drone": cv("urgent-drone", 0.97)},  # no normal task in this seed
    ]
    ok, judged = meets(target, seeds, "median")
    assert ok and judged == {"normal-drone": pytest.approx(0.95), "urgent-drone": 0.96}
    ok, judged = meets(target, seeds, "all")
    assert not ok and judged == {"normal-drone": 0.91, "urgent-drone": 0.90}
    lenient = CapacityTarget(urgent_full_share=0.0, normal_utility_share=0.9)
    assert meets(lenient, seeds, "all")[0]  # a threshold of 0 never fails


def test_impossible_targets_are_refused() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        CapacityTarget(urgent_full_share=1.5)
    with pytest.raises(ValidationError, match="asks nothing"):
        CapacityTarget(urgent_full_share=0, normal_utility_share=0)
