"""One scheduling decision: rank the queue by the policy, then admit greedily,
highest first, while the batch cap, the latency guide (§4.4) and KV memory allow.

Separate from the service loop so its cost can be measured on its own
(bench/scheduling.py) and so every policy shares the same admission rules.
"""

from __future__ import annotations

from collections.abc import Callable

from timely_core.scheduling.batch_control import LatencyGuidedBatch, RunningBudget
from timely_core.scheduling.policies.base import Policy
from timely_core.scheduling.queue_table import QueueEntry, QueueTable


class Scheduler:
    def __init__(self, policy: Policy, batch: LatencyGuidedBatch, max_batch_size: int) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.policy = policy
        self.batch = batch
        self.max_batch_size = max_batch_size
        self.table = QueueTable()

    def __len__(self) -> int:
        return len(self.table)

    def __contains__(self, gen_id: object) -> bool:
        return gen_id in self.table

    def enqueue(self, entry: QueueEntry) -> None:
        self.table.add(entry)

    def remove(self, gen_id: int) -> None:
        self.table.remove(gen_id)

    def set_ref(self, gen_id: int, ref_s: float) -> None:
        self.table.set_ref(gen_id, ref_s)

    def decide(
        self,
        now_s: float,
        running: list[RunningBudget],
        fits: Callable[[int], bool],
    ) -> list[int]:
        """Generation ids to admit now, best first; they stay in the queue until the
        caller removes them. `fits(gen_id)` says whether KV memory can take it; the
        greedy order is kept, so the first one that does not fit ends the decision."""
        if not len(self.table):
            return []
        order = self.policy.order(self.table, now_s)
        table = self.table
        budgets = list(running)
        chosen: list[int] = []
        guided = self.policy.latency_guided_batch
        for slot in order:
            if len(budgets) >= self.max_batch_size:
                break
            deadline = float(table.ref_s[slot] + table.ert_s[slot])
            if guided and not self.batch.may_admit(now_s, budgets, len(chosen), deadline):
                break
            gen_id = int(table.gen_id[slot])
            if not fits(gen_id):
                break
            chosen.append(gen_id)
            budgets.append(RunningBudget(deadline, 0))
        return chosen
