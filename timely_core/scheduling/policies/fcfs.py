"""`fcfs`: vLLM continuous batching; the whole plan is dispatched when it ends."""

from __future__ import annotations

from dataclasses import dataclass

from timely_core.scheduling.policies.base import DispatchMode, SlotOrder, arrival_order
from timely_core.scheduling.queue_table import QueueTable


@dataclass(frozen=True)
class FcfsPolicy:
    name: str = "fcfs"
    dispatch: DispatchMode = DispatchMode.WHOLE
    suspend_after_segment: bool = False
    latency_guided_batch: bool = False

    def order(self, table: QueueTable, now_s: float) -> SlotOrder:
        return arrival_order(table)
