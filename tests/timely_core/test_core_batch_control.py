"""Latency-guided batch size (§4.4) and the greedy scheduling decision."""

from __future__ import annotations

import pytest

from timely_core.batch_control import LatencyGuidedBatch, RunningBudget
from timely_core.policies import make_policy
from timely_core.queue_table import QueueEntry
from timely_core.scheduler import Scheduler


def entry(gen_id: int, ref_s: float = 0.0, ert_s: float = 1.0, beta: float = 1.0) -> QueueEntry:
    return QueueEntry(gen_id, gen_id, ref_s, ert_s, -2.0, beta, 0.09, ref_s, ref_s + ert_s)


def test_wcet_from_recent_token_rate_and_max_segment_tokens() -> None:
    batch = LatencyGuidedBatch(wcet_segment_tokens=10)
    assert batch.tokens_per_s() is None and batch.wcet_s(0) == 0.0
    for _ in range(4):
        batch.record_iteration(0.02)
    assert batch.tokens_per_s() == pytest.approx(50.0)
    assert batch.wcet_s(4) == pytest.approx(6 / 50.0)
    assert batch.wcet_s(12) == pytest.approx(1 / 50.0)  # past the bound: one more token


def test_admits_only_while_the_most_urgent_running_meets_its_budget() -> None:
    batch = LatencyGuidedBatch(wcet_segment_tokens=10)
    batch.record_iteration(0.05)  # 20 tokens/s: a fresh segment needs 0.5 s
    tight = RunningBudget(deadline_s=0.4, segment_tokens=0)
    loose = RunningBudget(deadline_s=0.6, segment_tokens=0)
    assert not batch.may_admit(0.0, [loose, tight], admitted=0)
    assert batch.may_admit(0.0, [loose], admitted=0)
    assert not batch.may_admit(0.0, [loose], admitted=1)  # one per step: the lag
    late = RunningBudget(deadline_s=-1.0, segment_tokens=3)
    assert batch.may_admit(0.0, [late], admitted=5)  # nothing left to protect


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="wcet_segment_tokens"):
        LatencyGuidedBatch(wcet_segment_tokens=0)
    with pytest.raises(ValueError, match="max_batch_size"):
        Scheduler(make_policy("timely"), LatencyGuidedBatch(), 0)


def test_decision_is_greedy_in_policy_order_and_stops_at_memory() -> None:
    scheduler = Scheduler(make_policy("fcfs"), LatencyGuidedBatch(), max_batch_size=8)
    for i in range(5):
        scheduler.enqueue(entry(i))
    assert scheduler.decide(0.0, [], lambda g: True) == [0, 1, 2, 3, 4]
    assert scheduler.decide(0.0, [], lambda g: g != 2) == [0, 1]
    capped = Scheduler(make_policy("fcfs"), LatencyGuidedBatch(), max_batch_size=3)
    for i in range(5):
        capped.enqueue(entry(i))
    assert capped.decide(0.0, [RunningBudget(9.0, 0)], lambda g: True) == [0, 1]


def test_timely_ranks_urgent_first_and_admits_one_per_step() -> None:
    scheduler = Scheduler(make_policy("timely"), LatencyGuidedBatch(), max_batch_size=8)
    scheduler.enqueue(entry(0, ert_s=1.0, beta=1.0))
    scheduler.enqueue(entry(1, ert_s=0.2, beta=2.0))
    assert scheduler.decide(0.0, [], lambda g: True) == [1]


def test_queue_table_swap_remove_keeps_rows_consistent() -> None:
    scheduler = Scheduler(make_policy("edf"), LatencyGuidedBatch(), max_batch_size=100)
    for i in range(100):  # grows past the initial capacity
        scheduler.enqueue(entry(i, ref_s=float(100 - i)))
    for i in range(0, 100, 2):
        scheduler.remove(i)
    assert len(scheduler) == 50 and 1 in scheduler and 2 not in scheduler
    order = scheduler.decide(0.0, [], lambda g: True)
    assert order == sorted(range(1, 100, 2), reverse=True)  # earliest deadline first
    with pytest.raises(ValueError, match="already queued"):
        scheduler.enqueue(entry(1))
