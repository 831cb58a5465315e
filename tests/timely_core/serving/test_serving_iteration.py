"""One scheduling point as the engine sees it: the policy's ranking of every live
generation is handed to the engine before admission, the batch is listed most
urgent first, and it never exceeds what the engine runs per iteration."""

from __future__ import annotations

from collections.abc import Sequence

from tests.timely_core.core_support import (
    PAPER_LATENCY,
    TinyLanguage,
    eos_id,
    make_tokenizer,
    plan_script,
)
from timely_core.clock import VirtualClock
from timely_core.engine.protocol import StepOutput
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

PLANS = {
    "look for the cat": "mf(50); tl(90); search('cat'); say('found it');",
    "evade": "mu(30); tr(45); md(30);",
}


class RecordingEngine(SimulatedEngine):
    """The simulator, recording what the service asks of it."""

    def __init__(self, config: SimulatedEngineConfig) -> None:
        super().__init__(VirtualClock(), PAPER_LATENCY, plan_script(PLANS), config)
        self.steps: list[list[int]] = []
        self.rankings: list[list[int]] = []  # the ranking in force at each step
        self._ranking: list[int] = []

    def set_ranking(self, gen_ids: list[int]) -> None:
        self._ranking = list(gen_ids)
        super().set_ranking(gen_ids)

    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        self.steps.append(list(gen_ids))
        self.rankings.append(self._ranking)
        return super().step(gen_ids)


def serve(
    policy: str, requests: Sequence[TaskRequest], max_generations: int = 64
) -> tuple[PlanningService, RecordingEngine]:
    engine = RecordingEngine(
        SimulatedEngineConfig(eos_token_id=eos_id(), max_generations=max_generations)
    )
    service = PlanningService(
        engine, make_tokenizer(), policy=policy, clock=engine.clock, config=ServiceConfig()
    )
    for robot in {r.robot_id for r in requests}:
        service.register_robot(robot, TinyLanguage())
    handles = [service.submit(r) for r in requests]
    service.run_until_idle()
    for handle in handles:
        result = handle.result(timeout_s=0)
        assert result.success, result.error
    return service, engine


def test_the_batch_is_listed_most_urgent_first_and_the_engine_gets_the_ranking() -> None:
    # edf admits everything at once (no latency guide): the urgent task, submitted
    # last, is admitted last, yet it leads every step it is in
    normal = [
        TaskRequest(task_id=f"n{i}", robot_id=f"d{i}", instruction="look for the cat")
        for i in range(3)
    ]
    urgent = TaskRequest(task_id="u", robot_id="d9", instruction="evade", tuf=Tuf.urgent())
    service, engine = serve("edf", [*normal, urgent])
    urgent_gen = service._state.generations["u"].gen_id
    with_urgent = [step for step in engine.steps if urgent_gen in step]
    assert with_urgent and all(step[0] == urgent_gen for step in with_urgent)
    for ranking, step in zip(engine.rankings, engine.steps, strict=True):
        assert [g for g in ranking if g in step] == step  # the batch in ranking order


def test_the_batch_never_exceeds_the_engines_max_generations() -> None:
    requests = [
        TaskRequest(task_id=f"t{i}", robot_id=f"d{i}", instruction="evade") for i in range(5)
    ]
    _, engine = serve("fcfs", requests, max_generations=2)
    assert max(len(step) for step in engine.steps) == 2  # capped, all 5 still served
