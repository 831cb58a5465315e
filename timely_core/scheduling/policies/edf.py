"""`edf`: segmented generation, earliest initial deadline (arrival + ERT) first; a
resumed generation keeps its initial priority (paper §7.3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from timely_core.scheduling.policies.base import DispatchMode, SlotOrder
from timely_core.scheduling.queue_table import QueueTable


@dataclass(frozen=True)
class EdfPolicy:
    name: str = "edf"
    dispatch: DispatchMode = DispatchMode.SEGMENT
    suspend_after_segment: bool = True
    latency_guided_batch: bool = False

    def order(self, table: QueueTable, now_s: float) -> SlotOrder:
        return np.lexsort((table.seq_view(), table.view("initial_deadline_s")))
