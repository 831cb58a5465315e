"""How long a suspended generation will wait: until its robot has executed what was
dispatched (or, in chat mode, the user has read it), by the language's expected
execution time (`estimate_execution_s`'s mean, not the minimum the scheduler plans
with), corrected per robot type by the measured completions `segment_done` reports.

The correction is a running mean of measured / expected over recent reports, and
its spread (coefficient of variation) tells `ttl` how far to trust a prediction.
"""

from __future__ import annotations

from timely_core.running_mean import RunningMean
from timely_core.serving.generation import Generation

DEFAULT_WAIT_CV = 0.25  # the spread assumed until a robot type has reports


class WaitPredictor:
    def __init__(self) -> None:
        self._ratios: dict[str, RunningMean] = {}  # of measured / expected
        self._expected: dict[tuple[int, int], float] = {}  # (gen id, segment) -> mean s

    def expected_execution_s(self, generation: Generation, index: int) -> float:
        """Segment `index`'s expected execution time, corrected by measurements."""
        key = (generation.gen_id, index)
        mean = self._expected.get(key)
        if mean is None:
            statements = list(generation.records[index].segment.statements)
            _, mean = generation.language.estimate_execution_s(statements)
            self._expected[key] = mean
        return mean * self._ratio(generation).mean

    def expected_end_s(self, generation: Generation) -> float:
        """When the robot is expected to finish everything dispatched to it (reported
        ends where known); the arrival if nothing was dispatched."""
        end = float("-inf")
        for index, record in enumerate(generation.records):
            if record.finished_at_s is not None:
                end = record.finished_at_s
            else:
                end = max(record.dispatch_s, end) + self.expected_execution_s(generation, index)
        return end if generation.records else generation.arrival_s

    def wait_s(self, generation: Generation, now_s: float, lead_s: float) -> float:
        """Predicted wait of a generation suspended at `now_s` that is resumed `lead_s`
        before its robot needs the next segment (0 for a call it waits on)."""
        return max(self.expected_end_s(generation) - lead_s - now_s, 0.0)

    def wait_cv(self, generation: Generation) -> float:
        return self._ratio(generation).spread(DEFAULT_WAIT_CV)

    def correction(self, robot_type: str) -> float:
        """Measured / expected execution time of `robot_type`'s segments so far (1.0
        before any report)."""
        ratio = self._ratios.get(robot_type)
        return 1.0 if ratio is None else ratio.mean

    def observe(self, generation: Generation, index: int) -> None:
        """A measured execution of segment `index` (segment_done) refines the ratio."""
        measured = generation.measured_execution_s(index)
        if measured is None:
            return
        statements = list(generation.records[index].segment.statements)
        _, expected = generation.language.estimate_execution_s(statements)  # uncorrected
        if expected > 0:
            self._ratio(generation).add(measured / expected)

    def forget(self, generation: Generation) -> None:
        for index in range(len(generation.records)):
            self._expected.pop((generation.gen_id, index), None)

    def _ratio(self, generation: Generation) -> RunningMean:
        """Measured / expected of this robot type (1.0 until its first report)."""
        return self._ratios.setdefault(generation.language.robot_type, RunningMean(mean=1.0))
