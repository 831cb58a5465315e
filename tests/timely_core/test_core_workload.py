"""A WID 1-like workload in virtual time (Poisson events of up to 8 drone tasks,
normal and urgent, 8 ms network latency) on the paper's latency profile: timely
gains more time utility than the baselines when the batch is constrained, and
serves urgent tasks far better than vLLM-style fcfs."""

from __future__ import annotations

import random
from functools import cache

import pytest

from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS
from tests.timely_core.robot_support import golden, languages, tokenizer
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.task_handle import TaskHandle

EVENTS = 12
# Two events a second: on Table 1's profile a batch member costs 0.1 ms of compute per
# decode, so at one event a second a batch of 8 is hardly contended (edf kept 99.9%
# of the urgent maximum) and the comparison would not be "under contention".
EVENTS_PER_S = 2.0
MAX_TASKS_PER_EVENT = 8


@cache
def mean_utility(policy: str, max_batch_size: int) -> tuple[float, float]:
    """(mean utility of all tasks, mean utility of urgent tasks)."""
    rng = random.Random(1)
    clock = VirtualClock()
    eos = tokenizer().token_to_id("<eos>")
    assert eos is not None
    engine = SimulatedEngine(
        clock,
        PAPER_LLAMA3_8B_RTX4090,
        golden,
        SimulatedEngineConfig(eos_token_id=eos),
    )
    config = ServiceConfig(max_batch_size=max_batch_size, dispatch_latency_s=0.008)
    service = PlanningService(
        engine, tokenizer(), policy, clock=clock, config=config, languages=languages()
    )
    drone_tasks = [t for t in LRTRACE_TASKS if t.robot_type == "drone"]
    handles: list[tuple[str, TaskHandle]] = []
    t = clock.now()
    for _ in range(EVENTS):
        t += rng.expovariate(EVENTS_PER_S)
        for task in rng.sample(drone_tasks, rng.randint(1, MAX_TASKS_PER_EVENT)):
            robot_id = f"r{len(handles)}"
            service.register_robot(robot_id, robot_type="drone")
            request = TaskRequest(
                robot_id=robot_id,
                scene=task.scene,
                instruction=task.instruction,
                tuf=Tuf.preset(task.urgency),
            )
            handles.append((task.urgency, service.submit_at(t, request)))
    service.run_until_idle()
    results = [(urgency, h.result(timeout_s=0)) for urgency, h in handles]
    assert all(r.success for _, r in results)
    urgent = [r.utility for u, r in results if u == "urgent"]
    return sum(r.utility for _, r in results) / len(results), sum(urgent) / len(urgent)


@pytest.mark.parametrize("max_batch_size", [4, 8])
def test_timely_gains_the_most_utility_under_contention(max_batch_size: int) -> None:
    timely, _ = mean_utility("timely", max_batch_size)
    for baseline in ("fcfs", "stream", "segmented-fcfs", "edf", "priority"):
        assert timely > mean_utility(baseline, max_batch_size)[0], baseline


def test_urgent_tasks_keep_most_of_their_utility_under_timely() -> None:
    _, timely_urgent = mean_utility("timely", 8)
    _, fcfs_urgent = mean_utility("fcfs", 8)
    assert timely_urgent > 0.8 * Tuf.urgent().initial_utility
    assert timely_urgent > 2 * fcfs_urgent
