"""The `timely` policy's order: Eq. 4, highest first; equal priorities (every task
whose utility has reached 0 has priority 0) by arrival, whatever the table's rows."""

from __future__ import annotations

from timely_core.scheduling.policies import make_policy
from timely_core.scheduling.queue_table import QueueEntry, QueueTable


def late(gen_id: int, arrival_s: float) -> QueueEntry:
    """A first segment long past its ERT at t = 100: utility 0, so priority 0."""
    return QueueEntry(
        gen_id=gen_id,
        seq=gen_id,
        ref_s=arrival_s,
        ert_s=0.2,
        slope=-2.0,
        initial_utility=1.0,
        segment_generation_s=0.09,
        arrival_s=arrival_s,
        initial_deadline_s=arrival_s + 0.2,
    )


def test_tasks_at_zero_utility_are_served_in_arrival_order() -> None:
    table = QueueTable()
    arrivals = {0: 3.0, 1: 1.0, 2: 4.0, 3: 2.0, 4: 0.5}
    for gen_id, arrival in arrivals.items():
        table.add(late(gen_id, arrival))
    table.remove(1)  # swap-remove: the last row moves into slot 1
    table.add(late(1, arrivals[1]))
    order = make_policy("timely").order(table, now_s=100.0)
    ranked = [int(table.gen_id[slot]) for slot in order]
    assert ranked == sorted(arrivals, key=arrivals.__getitem__)  # 4, 1, 3, 0, 2


def test_a_live_task_outranks_those_at_zero_utility() -> None:
    table = QueueTable()
    table.add(late(0, 0.0))
    table.add(late(1, 99.9))  # within its ERT at t = 100
    order = make_policy("timely").order(table, now_s=100.0)
    assert [int(table.gen_id[slot]) for slot in order] == [1, 0]
