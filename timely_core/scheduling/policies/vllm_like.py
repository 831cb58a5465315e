"""`vllm-like`: vLLM serving a call-interleaved workload as LAMPS's baseline: first
come, first served, and a generation that calls out ends there, so its KV is
discarded and recomputed (what the prefix cache still holds aside) when the call
returns."""

from __future__ import annotations

from dataclasses import dataclass

from timely_core.engine.protocol import HandlingStrategy
from timely_core.scheduling.policies.base import DispatchMode, SlotOrder, arrival_order
from timely_core.scheduling.queue_table import QueueTable


@dataclass(frozen=True)
class VllmLikePolicy:
    name: str = "vllm-like"
    dispatch: DispatchMode = DispatchMode.SEGMENT
    suspend_after_segment: bool = True
    latency_guided_batch: bool = False
    waits_for_calls: bool = True
    handling_strategy: HandlingStrategy = HandlingStrategy.DISCARD

    def order(self, table: QueueTable, now_s: float) -> SlotOrder:
        return arrival_order(table)
