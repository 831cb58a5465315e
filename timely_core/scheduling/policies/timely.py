"""`timely`: segmented generation ranked by Eq. 4 with latency-guided batching."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from timely_core.scheduling.policies.base import DispatchMode, SlotOrder
from timely_core.scheduling.priority import DEFAULT_MIN_SLACK_S, pud_priorities
from timely_core.scheduling.queue_table import QueueTable


@dataclass(frozen=True)
class TimelyPolicy:
    min_slack_s: float = DEFAULT_MIN_SLACK_S
    name: str = "timely"
    dispatch: DispatchMode = DispatchMode.SEGMENT
    suspend_after_segment: bool = True
    latency_guided_batch: bool = True

    def order(self, table: QueueTable, now_s: float) -> SlotOrder:
        priorities = pud_priorities(
            now_s,
            table.view("ref_s"),
            table.view("ert_s"),
            table.view("slope"),
            table.view("initial_utility"),
            table.view("segment_generation_s"),
            self.min_slack_s,
        )
        # ties (every task whose utility has reached 0 has priority 0): by arrival
        return np.lexsort((table.seq_view(), table.view("arrival_s"), -priorities))
