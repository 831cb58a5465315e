"""`infercept`: INFERCEPT as LAMPS compares with it: first come, first served, each
segment ending in a call the generation waits on, and each waiting generation's KV
preserved, swapped or discarded by the least waste at the call (`auto`)."""

from __future__ import annotations

from dataclasses import dataclass

from timely_core.engine.protocol import HandlingStrategy
from timely_core.scheduling.policies.base import DispatchMode, SlotOrder, arrival_order
from timely_core.scheduling.queue_table import QueueTable


@dataclass(frozen=True)
class InferceptPolicy:
    name: str = "infercept"
    dispatch: DispatchMode = DispatchMode.SEGMENT
    suspend_after_segment: bool = True
    latency_guided_batch: bool = False
    waits_for_calls: bool = True
    handling_strategy: HandlingStrategy = HandlingStrategy.AUTO

    def order(self, table: QueueTable, now_s: float) -> SlotOrder:
        return arrival_order(table)
