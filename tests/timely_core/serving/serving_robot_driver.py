"""Test support: simulated robots in virtual time. Each robot executes its task's
segments in order as they are delivered, for `exec_s(segment)` seconds each, and
reports every end with `segment_done` (what policies that wait for calls need)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from timely_core.clock import VirtualClock
from timely_core.events import Segment
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.task_handle import TaskHandle

ExecTime = Callable[[Segment], float]
STEP_S = 0.01  # longest a robot's end can wait to be reported


def by_estimate(segment: Segment) -> float:
    return segment.estimated_execution_s


class RobotDriver:
    def __init__(
        self, service: PlanningService, clock: VirtualClock, exec_s: ExecTime = by_estimate
    ) -> None:
        self.service = service
        self.clock = clock
        self.exec_s = exec_s
        self.handles: list[TaskHandle] = []
        self._busy_until: dict[str, float] = {}
        self._ends: list[tuple[float, int, str, int]] = []
        self._order = 0
        self._arrivals: list[float] = []

    def submit_at(self, t_s: float, request: TaskRequest) -> TaskHandle:
        self._arrivals.append(t_s)
        handle = self.service.submit_at(t_s, request)
        handle.on_segment(self._on_segment)
        self.handles.append(handle)
        return handle

    def _on_segment(self, segment: Segment) -> None:
        start = max(segment.emitted_at_s, self._busy_until.get(segment.robot_id, 0.0))
        end = start + self.exec_s(segment)
        self._busy_until[segment.robot_id] = end
        self._order += 1
        heapq.heappush(self._ends, (end, self._order, segment.task_id, segment.index))

    def run(self, limit_s: float = 10_000.0) -> None:
        """Until every task has its result (or the clock passes `limit_s`)."""
        while not all(h.done() for h in self.handles) and self.clock.now() < limit_s:
            # in short steps while anything is live: an idle service sleeps the clock
            # to the target, past ends of segments delivered meanwhile
            now = self.clock.now()
            stats = self.service.stats()
            events = [self._ends[0][0]] if self._ends else []
            events += [t for t in sorted(self._arrivals) if t > now][:1]
            if stats.running + stats.queued + stats.awaiting_verdicts:
                events.append(now + STEP_S)
            if not events:
                break  # nothing live, no end to report, no arrival to come
            end_s = max(min(events), now)
            self.service.run_until(end_s)
            self.clock.sleep_until(end_s)
            while self._ends and self._ends[0][0] <= self.clock.now():
                t_s, _, task_id, index = heapq.heappop(self._ends)
                self.service.segment_done(task_id, index, finished_at_s=t_s)


def run_tasks(
    service: PlanningService,
    clock: VirtualClock,
    requests: Sequence[tuple[float, TaskRequest]],
    exec_s: ExecTime = by_estimate,
) -> list[TaskHandle]:
    driver = RobotDriver(service, clock, exec_s)
    handles = [driver.submit_at(t, request) for t, request in requests]
    driver.run()
    return handles
