"""The service with the real robot plan languages (robot_models: drone and arm
parsers, prompt prefixes, execution-time models) on the simulated engine replaying
the LRTrace golden plans: every plan arrives whole, one segment per statement."""

from __future__ import annotations

import pytest

from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS
from tests.timely_core.robot_support import golden, languages, tokenizer
from timely_core.clock import VirtualClock
from timely_core.engine.simulated import LinearLatencyModel, SimulatedEngine, SimulatedEngineConfig
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.task_handle import TaskHandle
from timely_core.tuf import Tuf


def serve_lrtrace_burst(policy: str) -> dict[int, TaskHandle]:
    """All 11 LRTrace tasks at once, one robot each."""
    clock = VirtualClock()
    eos = tokenizer().token_to_id("<eos>")
    assert eos is not None
    engine = SimulatedEngine(
        clock,
        LinearLatencyModel.paper_llama3_8b_rtx4090(),
        golden,
        SimulatedEngineConfig(eos_token_id=eos),
    )
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
