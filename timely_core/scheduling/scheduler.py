"""One scheduling decision: rank every live generation by the policy, then admit
queued ones greedily, highest first, while the batch cap, the latency guide (§4.4)
and KV memory allow. The same ranking orders the running batch and tells the engine
whom to preempt first.

Separate from the service loop so its cost can be measured on its own
(bench/scheduling.py) and so every policy shares the same admission rules.
"""

from __future__ import annotations

from collections.abc import Callable

from timely_core.scheduling.batch_control import LatencyGuidedBatch, RunningBudget
from timely_core.scheduling.policies.base import Policy, SlotOrder
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
        """Generations waiting for the engine (running ones not counted)."""
        return self.table.num_queued

    def __contains__(self, gen_id: object) -> bool:
        """Whether `gen_id` is live here, queued or running."""
        return gen_id in self.table

    def enqueue(self, entry: QueueEntry) -> None:
        """Queue a new generation, or a running one again for its next segment."""
        if entry.gen_id in self.table:
            self.table.requeue(entry)
        else:
            self.table.add(entry)

    def start(self, gen_id: int) -> None:
        """The generation was admitted: it runs, and stays ranked."""
        self.table.set_running(gen_id, True)

    def remove(self, gen_id: int) -> None:
        self.table.remove(gen_id)

    def rank(self, now_s: float) -> SlotOrder:
        """Slots of every live generation, most urgent first by the policy."""
        return self.policy.order(self.table, now_s)

    def ranked_ids(self, order: SlotOrder) -> list[int]:
        """The generation ids of `order`."""
        ids: list[int] = self.table.gen_id_view()[order].tolist()
        return ids

    def set_ref(self, gen_id: int, ref_s: float) -> None:
        self.table.set_ref(gen_id, ref_s)

    def decide(
        self,
        now_s: float,
        running: list[RunningBudget],
        fits: Callable[[int], bool],
        order: SlotOrder | None = None,
    ) -> list[int]:
        """Queued generation ids to admit now, best first; they stay queued until the
        caller `start`s them. `fits(gen_id)` says whether KV memory can take it; the
        greedy order is kept, so the first one that does not fit ends the decision.
        `order`: this point's `rank`, if the caller has it already."""
        if not len(self):
            return []
        if order is None:
            order = self.rank(now_s)
        table = self.table
        queued = ~table.running_view()[order]
        budgets = list(running)
        chosen: list[int] = []
        guided = self.policy.latency_guided_batch
        ready = table.ready_s[order[queued]] <= now_s  # a call still out: skipped
        for slot in order[queued][ready]:
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
