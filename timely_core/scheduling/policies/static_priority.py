"""`priority`: vLLM's priority scheduling; a static priority per urgency class (the
TUF's initial utility, higher first), ties first come, first served; the whole plan
is dispatched at the end."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from timely_core.scheduling.policies.base import DispatchMode, SlotOrder
from timely_core.scheduling.queue_table import QueueTable


@dataclass(frozen=True)
class StaticPriorityPolicy:
    name: str = "priority"
    dispatch: DispatchMode = DispatchMode.WHOLE
    suspend_after_segment: bool = False
    latency_guided_batch: bool = False

    def order(self, table: QueueTable, now_s: float) -> SlotOrder:
        return np.lexsort((table.seq_view(), -table.view("initial_utility")))
