"""segment_done's hook: a plan language that learns (`ExecutionFeedback`) is told how
long each reported segment took, and the service plans later segments with what it
learned."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tests.timely_core.core_support import StatementParser, TinyLanguage, make_service
from timely_core.events import Segment
from timely_core.language.plan_language import PlanLanguage, PlanStatement
from timely_core.request import TaskRequest
from timely_core.serving.execution_feedback import ExecutionFeedback

PLANS = {"look for the cat": "mf(50); tl(90); search('cat'); say('found it');"}


class LearningLanguage:
    """TinyLanguage whose estimates scale by the last reported duration / estimate."""

    robot_type = "tiny"

    def __init__(self) -> None:
        self._inner = TinyLanguage()
        self.scale = 1.0
        self.observed: list[tuple[list[str], float]] = []

    def prompt_prefix(self) -> str:
        return self._inner.prompt_prefix()

    def format_request(self, scene: str, instruction: str) -> str:
        return self._inner.format_request(scene, instruction)

    def new_parser(self) -> StatementParser:
        return self._inner.new_parser()

    def estimate_execution_s(self, statements: Sequence[PlanStatement]) -> tuple[float, float]:
        low, mean = self._inner.estimate_execution_s(statements)
        return low * self.scale, mean * self.scale

    def observe_execution(self, statements: Sequence[PlanStatement], duration_s: float) -> None:
        self.observed.append(([s.text for s in statements], duration_s))
        self.scale = duration_s / self._inner.estimate_execution_s(statements)[0]


def serve(reports: list[tuple[int, float]]) -> tuple[LearningLanguage, list[Segment]]:
    """One task; once the last segment named in `reports` is delivered, the robot
    reports each (index, seconds after it got that segment) in the order given."""
    language = LearningLanguage()
    assert isinstance(language, PlanLanguage) and isinstance(language, ExecutionFeedback)
    service, _, _ = make_service(PLANS, robots=())
    service.register_robot("drone1", language)
    handle = service.submit(TaskRequest(robot_id="drone1", instruction="look for the cat"))
    received: dict[int, float] = {}

    def robot(segment: Segment) -> None:
        received[segment.index] = segment.emitted_at_s
        if segment.index == max(index for index, _ in reports):
            for index, took_s in reports:
                handle.segment_done(index, finished_at_s=received[index] + took_s)

    handle.on_segment(robot)
    service.run_until_idle()
    return language, list(handle.segments())


def test_a_reported_duration_reaches_the_language_and_the_next_estimates() -> None:
    language, segments = serve([(0, 3.0)])
    assert language.observed == [(["mf(50);"], pytest.approx(3.0))]
    assert segments[0].estimated_execution_s == pytest.approx(1.0)
    assert segments[1].estimated_execution_s == pytest.approx(3.0)  # tl(90): 1 s x 3


def test_a_segment_whose_start_is_not_known_is_not_reported() -> None:
    """Segment 1 reported before segment 0: its start (the end of 0) is unknown."""
    language, _ = serve([(1, 2.0), (0, 3.0)])
    assert language.observed == [(["mf(50);"], pytest.approx(3.0))]


def test_each_segment_is_reported_once() -> None:
    language, _ = serve([(0, 3.0), (0, 5.0)])
    assert language.observed == [(["mf(50);"], pytest.approx(3.0))]
