"""What a scheduling policy decides: the order of the queue, and how a plan is cut.

All policies run on the same engine and the same service loop; they differ only
in these four answers, which keeps the baselines of the paper honest.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from timely_core.engine.protocol import HandlingStrategy
from timely_core.scheduling.queue_table import QueueTable

SlotOrder = npt.NDArray[np.intp]


class DispatchMode(str, Enum):
    """When decoded statements reach the robot."""

    SEGMENT = "segment"  # each complete statement ends a segment (TimelyLLM)
    STATEMENT = "statement"  # each statement is streamed at once, never suspending
    WHOLE = "whole"  # one segment holding the whole plan, at the end (vLLM)


class Policy(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def dispatch(self) -> DispatchMode: ...

    @property
    def suspend_after_segment(self) -> bool:
        """Suspend the generation and re-queue it when a segment is emitted."""

    @property
    def latency_guided_batch(self) -> bool:
        """Admit only while the most urgent running generation meets its budget
        (§4.4); otherwise admit up to the batch cap and KV memory (vLLM)."""

    def order(self, table: QueueTable, now_s: float) -> SlotOrder:
        """Slots of `table`, highest priority first."""


@runtime_checkable
class CallPolicy(Protocol):
    """Optional for a `Policy` (LAMPS and its baselines): a segment ends in a call
    the generation waits on (a tool, or the robot's execution), so a suspended
    generation is not admitted before `segment_done` reports the segment's end;
    and the policy's own KV handling replaces the service's `handling_strategy`."""

    @property
    def waits_for_calls(self) -> bool: ...

    @property
    def handling_strategy(self) -> HandlingStrategy: ...


def arrival_order(table: QueueTable) -> SlotOrder:
    """First come, first served (submission order)."""
    return np.argsort(table.seq_view(), kind="stable")
