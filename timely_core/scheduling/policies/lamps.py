"""`lamps`: LAMPS's memory-over-time ranking. A segment ends in a call the generation
waits on (a tool, the robot's execution); queued generations rank by the integral
of the memory they will hold over time, the next segment and the wait after it
under its min-waste strategy (`memory_time`, kept by the service), smallest first.
A generation left ready in the queue for `starvation_iterations` scheduling points
is pinned at the head (the paper: 100) until it is done: its later segments, after
their calls, stay pinned (LAMPS: "prioritization continues until request
completion, avoiding memory waste from preempted, half-finished requests"); the
counter of one not pinned restarts at each call."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from timely_core.engine.protocol import HandlingStrategy
from timely_core.scheduling.policies.base import DispatchMode, SlotOrder
from timely_core.scheduling.queue_table import QueueTable

STARVATION_ITERATIONS = 100


@dataclass(frozen=True)
class LampsPolicy:
    starvation_iterations: int = STARVATION_ITERATIONS
    name: str = "lamps"
    dispatch: DispatchMode = DispatchMode.SEGMENT
    suspend_after_segment: bool = True
    latency_guided_batch: bool = False
    waits_for_calls: bool = True
    handling_strategy: HandlingStrategy = HandlingStrategy.AUTO
    # generations pinned for starving, until they leave the table (one service's)
    pinned: set[int] = field(default_factory=set, compare=False, repr=False)

    def order(self, table: QueueTable, now_s: float) -> SlotOrder:
        """Also counts, per queued generation whose call has returned, one more
        scheduling point waited (called once per scheduling point)."""
        waited = table.view("waited")
        waiting = ~table.running_view() & (table.view("ready_s") <= now_s)
        waited[waiting] += 1.0
        gen_ids = table.gen_id_view()
        starved = waited >= self.starvation_iterations  # running ones stay first too
        if self.pinned:
            live = np.isin(gen_ids, np.fromiter(self.pinned, np.int64, len(self.pinned)))
            self.pinned.intersection_update(gen_ids[live].tolist())  # done: unpinned
            starved |= live
        if starved.any():
            self.pinned.update(gen_ids[starved].tolist())
        return np.lexsort((table.seq_view(), table.view("memory_time"), ~starved))
