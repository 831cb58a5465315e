"""`lamps` ranks by memory over time, smallest first, and pins a starved generation
at the head; `infercept` and `vllm-like` are first come, first served; queued
generations whose call is still out are not admitted."""

from __future__ import annotations

import math

import numpy as np

from timely_core.engine.protocol import HandlingStrategy
from timely_core.scheduling.batch_control import LatencyGuidedBatch
from timely_core.scheduling.policies import CallPolicy, make_policy
from timely_core.scheduling.policies.lamps import LampsPolicy
from timely_core.scheduling.queue_table import QueueEntry, QueueTable
from timely_core.scheduling.scheduler import Scheduler


def entry(gen_id: int, memory_time: float, ready_s: float = 0.0) -> QueueEntry:
    return QueueEntry(
        gen_id=gen_id,
        seq=gen_id,
        ref_s=0.0,
        ert_s=1.0,
        slope=0.1,
        initial_utility=1.0,
        segment_generation_s=0.1,
        arrival_s=float(gen_id),
        initial_deadline_s=1.0 + gen_id,
        ready_s=ready_s,
        memory_time=memory_time,
    )


def ranked(table: QueueTable, policy: LampsPolicy, now_s: float = 0.0) -> list[int]:
    return [int(table.gen_id[s]) for s in policy.order(table, now_s)]


def test_smallest_memory_over_time_first_ties_by_arrival() -> None:
    table = QueueTable()
    for gen_id, score in [(0, 50.0), (1, 10.0), (2, 30.0), (3, 10.0)]:
        table.add(entry(gen_id, score))
    assert ranked(table, LampsPolicy()) == [1, 3, 2, 0]


def test_a_starved_generation_is_pinned_at_the_head_until_it_is_done() -> None:
    table = QueueTable()
    table.add(entry(0, 1000.0))  # the largest: always last by score
    table.add(entry(1, 1.0))
    table.set_running(1, True)  # running: not waiting
    table.add(entry(2, 2.0, ready_s=math.inf))  # its call is out: not starving
    policy = LampsPolicy(starvation_iterations=5)
    orders = [ranked(table, policy) for _ in range(5)]
    assert orders[:4] == [[1, 2, 0]] * 4
    assert orders[4] == [0, 1, 2]  # 5 scheduling points waited: pinned
    table.set_running(0, True)
    assert ranked(table, policy)[0] == 0  # still first while it runs
    assert table.view("waited")[2] == 0  # waiting on a call counts nothing
    table.requeue(entry(0, 1000.0))  # its next segment, after a call: still pinned
    assert ranked(table, policy) == [0, 1, 2]
    assert table.view("waited")[1] == 0
    table.remove(0)  # done
    table.add(entry(3, 1000.0))
    assert ranked(table, policy) == [1, 2, 3] and policy.pinned == set()


def test_queued_generations_whose_call_is_out_are_skipped() -> None:
    scheduler = Scheduler(make_policy("lamps"), LatencyGuidedBatch(10), max_batch_size=8)
    scheduler.enqueue(entry(0, 1.0, ready_s=math.inf))
    scheduler.enqueue(entry(1, 5.0, ready_s=2.0))
    scheduler.enqueue(entry(2, 9.0))
    assert scheduler.decide(1.0, [], lambda g: True) == [2]
    assert scheduler.decide(2.0, [], lambda g: True) == [1, 2]
    scheduler.table.set_ready(0, 2.5)
    assert scheduler.decide(3.0, [], lambda g: True) == [0, 1, 2]


def test_baselines_are_fcfs_with_their_own_kv_handling() -> None:
    table = QueueTable()
    for gen_id, score in [(0, 50.0), (1, 10.0), (2, 30.0)]:
        table.add(entry(gen_id, score))
    for name, strategy in [
        ("infercept", HandlingStrategy.AUTO),
        ("vllm-like", HandlingStrategy.DISCARD),
        ("lamps", HandlingStrategy.AUTO),
    ]:
        policy = make_policy(name)
        assert isinstance(policy, CallPolicy) and policy.waits_for_calls
        assert policy.handling_strategy is strategy
        if name != "lamps":
            assert list(policy.order(table, 0.0)) == [0, 1, 2]
    assert not isinstance(make_policy("timely"), CallPolicy)


def test_ranking_a_thousand_is_vectorised() -> None:
    """Behaviour at scale (the cost is measured in bench/lamps.py): a full order."""
    table = QueueTable()
    rng = np.random.default_rng(0)
    scores = rng.uniform(1, 1e6, 1000)
    for gen_id, score in enumerate(scores):
        table.add(entry(gen_id, float(score)))
    order = LampsPolicy().order(table, 0.0)
    assert [int(table.gen_id[s]) for s in order] == list(np.argsort(scores, kind="stable"))
