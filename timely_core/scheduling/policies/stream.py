"""`stream`: vLLM-stream; each statement goes to the robot as soon as it is decoded,
but the generation never yields the engine (TypeFly-style stream interpretation)."""

from __future__ import annotations

from dataclasses import dataclass

from timely_core.scheduling.policies.base import DispatchMode, SlotOrder, arrival_order
from timely_core.scheduling.queue_table import QueueTable


@dataclass(frozen=True)
class StreamPolicy:
    name: str = "stream"
    dispatch: DispatchMode = DispatchMode.STATEMENT
    suspend_after_segment: bool = False
    latency_guided_batch: bool = False

    def order(self, table: QueueTable, now_s: float) -> SlotOrder:
        return arrival_order(table)
