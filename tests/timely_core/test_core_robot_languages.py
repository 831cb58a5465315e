"""The service with the real robot plan languages (robot_models: drone and arm
parsers, prompt prefixes, execution-time models) on the simulated engine replaying
the LRTrace golden plans: every plan arrives whole, one segment per statement."""

from __future__ import annotations

import pytest

from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS
from robot_models.language import load_language
from tests.timely_core.robot_support import golden, languages, tokenizer
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.events import Segment
from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf
from timely_core.service import PlanningService
from timely_core.task_handle import TaskHandle


def golden_engine(clock: VirtualClock) -> SimulatedEngine:
    eos = tokenizer().token_to_id("<eos>")
    assert eos is not None
    return SimulatedEngine(
        clock,
        PAPER_LLAMA3_8B_RTX4090,
        golden,
        SimulatedEngineConfig(eos_token_id=eos),
    )


def serve_lrtrace_burst(policy: str) -> dict[int, TaskHandle]:
    """All 11 LRTrace tasks at once, one robot each."""
    clock = VirtualClock()
    engine = golden_engine(clock)
    service = PlanningService(engine, tokenizer(), policy, clock=clock, languages=languages())
    handles = {}
    for task in LRTRACE_TASKS:
        robot_id = f"r{task.trace_id}"
        service.register_robot(robot_id, robot_type=task.robot_type)
        handles[task.trace_id] = service.submit(
            TaskRequest(
                robot_id=robot_id,
                scene=task.scene,
                instruction=task.instruction,
                tuf=Tuf.preset(task.urgency),
            )
        )
    assert engine.memory().pinned_prefix_blocks > 0
    service.run_until_idle()
    return handles


@pytest.mark.parametrize("policy", ["timely", "fcfs", "stream"])
def test_lrtrace_plans_arrive_whole_and_in_order(policy: str) -> None:
    handles = serve_lrtrace_burst(policy)
    for task in LRTRACE_TASKS:
        handle = handles[task.trace_id]
        result = handle.result(timeout_s=0)
        assert result.success, f"trace {task.trace_id}: {result.error}"
        segments = list(handle.segments())
        assert "".join(s.text for s in segments) == task.golden_plan
        statements = languages()[task.robot_type].parse(task.golden_plan)  # type: ignore[attr-defined]
        if policy == "fcfs":
            assert [len(s.statements) for s in segments] == [len(statements)]
        else:
            assert [len(s.statements) for s in segments] == [1] * len(statements)
        assert all(s.estimated_execution_s >= 0 for s in segments)


def test_timely_gains_more_utility_than_fcfs_in_a_burst() -> None:
    def total(policy: str) -> float:
        return sum(h.result(timeout_s=0).utility for h in serve_lrtrace_burst(policy).values())

    assert total("timely") > 1.5 * total("fcfs")


def test_reported_executions_refine_the_drone_execution_time_model() -> None:
    """A drone that takes twice the model's mean for every skill reports it with
    segment_done; once each skill has 3 reports (ONLINE_MIN_RECORDS) the service
    plans the same task with the measured times."""
    language = load_language("drone", learn_from_executions=True)
    task = next(t for t in LRTRACE_TASKS if t.golden_plan == "mu(150);tc(180);mf(200);")
    means = [language.estimate_execution_s([s])[1] for s in language.parse(task.golden_plan)]
    clock = VirtualClock()
    service = PlanningService(
        golden_engine(clock), tokenizer(), clock=clock, languages={"drone": language}
    )
    estimates = []
    for run in range(4):
        service.register_robot(f"d{run}", robot_type="drone")
        handle = service.submit(
            TaskRequest(robot_id=f"d{run}", scene=task.scene, instruction=task.instruction)
        )
        robot_free_at = [0.0]

        def slow_robot(
            segment: Segment, handle: TaskHandle = handle, end: list[float] = robot_free_at
        ) -> None:
            end[0] = max(segment.emitted_at_s, end[0]) + 2 * means[segment.index]
            handle.segment_done(segment.index, finished_at_s=end[0])

        handle.on_segment(slow_robot)
        service.run_until_idle()
        assert handle.result(timeout_s=0).success
        estimates.append([s.estimated_execution_s for s in handle.segments()])
    assert all(e < m for e, m in zip(estimates[0], means, strict=True))  # the minimum
    assert estimates[-1] == pytest.approx([2 * m for m in means])


def test_without_learning_reports_leave_the_model_alone() -> None:
    language = load_language("drone")
    statements = language.parse("mu(150);")
    before = language.estimate_execution_s(statements)
    for _ in range(5):
        language.observe_execution(statements, 10.0)
    assert language.estimate_execution_s(statements) == before


def test_only_straight_line_segments_refine_the_model() -> None:
    """A conditional's duration says nothing sure about its calls: it is not used."""
    language = load_language("drone", learn_from_executions=True)
    branch = language.parse("?sw('cat')==True{mu(150);}")
    plain = language.parse("mu(150);")
    before = language.estimate_execution_s(plain)
    for _ in range(5):
        language.observe_execution(branch, 10.0)
    assert language.estimate_execution_s(plain) == before
    for _ in range(3):
        language.observe_execution(plain, 10.0)
    assert language.estimate_execution_s(plain) == pytest.approx((10.0, 10.0))
