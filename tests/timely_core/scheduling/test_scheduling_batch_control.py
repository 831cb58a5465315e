"""Latency-guided batch size (§4.4) and the greedy scheduling decision."""

from __future__ import annotations

import pytest

from timely_core.scheduling.batch_control import LatencyGuidedBatch, RunningBudget
from timely_core.scheduling.policies import make_policy
from timely_core.scheduling.queue_table import QueueEntry
from timely_core.scheduling.scheduler import Scheduler


def entry(gen_id: int, ref_s: float = 0.0, ert_s: float = 1.0, beta: float = 1.0) -> QueueEntry:
    return QueueEntry(gen_id, gen_id, ref_s, ert_s, -2.0, beta, 0.09, ref_s, ref_s + ert_s)


def test_wcet_from_recent_token_rate_and_max_segment_tokens() -> None:
    batch = LatencyGuidedBatch(wcet_segment_tokens=10)
    assert batch.iteration_s(1) is None and batch.wcet_s(0) == 0.0
    for _ in range(4):
        batch.record_iteration(0.02, batch_size=3)  # 50 tokens/s per generation
    assert batch.wcet_s(4) == pytest.approx(6 / 50.0)
    assert batch.wcet_s(12) == pytest.approx(1 / 50.0)  # past the bound: one more token
    assert batch.iteration_s(8) == pytest.approx(0.02)  # one batch size seen: no slope yet


def test_iteration_time_of_a_larger_batch_is_fitted_from_recent_iterations() -> None:
    batch = LatencyGuidedBatch()
    for size in (1, 2, 3, 4):
        batch.record_iteration(0.020 + 0.002 * size, batch_size=size)
    assert batch.iteration_s(10) == pytest.approx(0.040)
    assert batch.wcet_s(0, batch_size=10) == pytest.approx(0.4)


def test_without_a_fit_one_generation_joins_per_step() -> None:
    batch = LatencyGuidedBatch(wcet_segment_tokens=10)
    batch.record_iteration(0.01, batch_size=1)
    loose = RunningBudget(deadline_s=5.0, segment_tokens=0)
    assert batch.may_admit(0.0, [loose], admitted=0)
    assert not batch.may_admit(0.0, [loose, loose], admitted=1)  # the lag for one


def test_a_steady_batch_keeps_the_fitted_marginal_cost() -> None:
    """Between bursts the window may hold one batch size only; the slope fitted
    before stays, so the next burst is not held to one generation per step."""
    batch = LatencyGuidedBatch(window=4)
    for size in (1, 2):
        batch.record_iteration(0.010 + 0.002 * size, batch_size=size)
    for _ in range(4):  # the window now holds batch size 3 only
        batch.record_iteration(0.016, batch_size=3)
    assert batch.iteration_s(5) == pytest.approx(0.016 + 2 * 0.002)
    loose = RunningBudget(deadline_s=5.0, segment_tokens=0)
    assert batch.may_admit(0.0, [loose] * 4, admitted=2)
    fresh = LatencyGuidedBatch(window=4)  # never saw two sizes: still the lag for one
    for _ in range(4):
        fresh.record_iteration(0.0170, batch_size=3)
    assert fresh.iteration_s(5) == pytest.approx(0.0170)
    assert not fresh.may_admit(0.0, [loose] * 4, admitted=1)


def test_admits_only_while_the_protected_generations_keep_their_budget() -> None:
    batch = LatencyGuidedBatch(wcet_segment_tokens=10)
    batch.record_iteration(0.05, batch_size=1)
    batch.record_iteration(0.06, batch_size=2)  # 0.04 s + 0.01 s per generation
    # Batch of 2: a fresh segment needs 10 x 0.06 = 0.6 s; of 3: 0.7 s.
    tight = RunningBudget(deadline_s=0.65, segment_tokens=0)
    loose = RunningBudget(deadline_s=0.75, segment_tokens=0)
    assert not batch.may_admit(0.0, [loose, tight], admitted=0)
    assert batch.may_admit(0.0, [loose, loose], admitted=3)  # fitted: no per-step cap
    hopeless = RunningBudget(deadline_s=0.5, segment_tokens=0)  # misses even now
    assert batch.may_admit(0.0, [loose, hopeless], admitted=0)  # holding back cannot save it
    assert batch.may_admit(0.0, [], admitted=0)


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="wcet_segment_tokens"):
        LatencyGuidedBatch(wcet_segment_tokens=0)
    with pytest.raises(ValueError, match="window"):
        LatencyGuidedBatch(window=1)
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


def test_a_late_generation_holds_back_only_candidates_that_can_wait_for_it() -> None:
    batch = LatencyGuidedBatch(wcet_segment_tokens=10)
    batch.record_iteration(0.05, batch_size=1)
    batch.record_iteration(0.06, batch_size=2)  # 0.04 s + 0.01 s per generation
    # An urgent segment due at 0.2 s needs 10 x 0.05 s: late by the bound already.
    urgent = RunningBudget(deadline_s=0.2, segment_tokens=0)
    # A normal candidate due at 1.0 s still makes it if admitted at 0.2 s (+0.5 s).
    assert not batch.may_admit(0.0, [urgent], admitted=0, candidate_deadline_s=1.0)
    # Another urgent one cannot wait: holding it back would not save the first.
    assert batch.may_admit(0.0, [urgent], admitted=0, candidate_deadline_s=0.21)
    assert batch.may_admit(0.0, [urgent], admitted=0, candidate_deadline_s=0.69)
    assert batch.may_admit(0.0, [urgent], admitted=0)  # candidate unknown: not held
    # Past its deadline it is protected no more (an overload must not shrink the batch).
    assert batch.may_admit(0.25, [urgent], admitted=0, candidate_deadline_s=1.0)


def test_timely_admits_an_urgent_burst_and_defers_normal_first_segments() -> None:
    batch = LatencyGuidedBatch()
    for size in (1, 2):
        batch.record_iteration(0.020 + 0.002 * size, batch_size=size)
    scheduler = Scheduler(make_policy("timely"), batch, max_batch_size=8)
    for i in range(3):
        scheduler.enqueue(entry(i, ert_s=1.0, beta=1.0))  # normal
    for i in range(3, 6):
        scheduler.enqueue(entry(i, ert_s=0.2, beta=2.0))  # urgent, same arrival
    assert scheduler.decide(0.0, [], lambda g: True) == [3, 4, 5]
    fcfs = Scheduler(make_policy("fcfs"), batch, max_batch_size=8)
    for i in range(6):
        fcfs.enqueue(entry(i, ert_s=0.2 if i >= 3 else 1.0, beta=2.0 if i >= 3 else 1.0))
    assert fcfs.decide(0.0, [], lambda g: True) == [0, 1, 2, 3, 4, 5]
