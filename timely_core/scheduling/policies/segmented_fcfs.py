"""`segmented-fcfs`: TimelyLLM's segmented generation, but queued first come, first
served; a resumed generation keeps its initial priority (paper §7.3)."""

from __future__ import annotations

from dataclasses import dataclass

from timely_core.scheduling.policies.base import DispatchMode, SlotOrder, arrival_order
from timely_core.scheduling.queue_table import QueueTable


@dataclass(frozen=True)
class SegmentedFcfsPolicy:
    name: str = "segmented-fcfs"
    dispatch: DispatchMode = DispatchMode.SEGMENT
    suspend_after_segment: bool = True
    latency_guided_batch: bool = False

    def order(self, table: QueueTable, now_s: float) -> SlotOrder:
        return arrival_order(table)
