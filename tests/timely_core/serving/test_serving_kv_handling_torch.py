"""On the real TorchEngine: the strategies `auto` chooses for waiting generations
(swap over a fast link, discard over a slow one, per the engine's cost profile)
give exactly the greedy output of the engine driven straight through, as
preserve does. A call-waiting policy (infercept) makes every segment wait 5 s of
virtual time for its robot, so the choice is never preserve."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.timely_core.core_support import make_tokenizer
from tests.timely_core.serving.serving_robot_driver import RobotDriver
from tests.timely_core.test_core_torch_service import (  # noqa: F401 (a fixture)
    INSTRUCTIONS,
    MAX_TOKENS,
    WordLanguage,
    checkpoint,
    unsegmented,
)
from timely_core.clock import VirtualClock
from timely_core.engine.protocol import HandlingStrategy
from timely_core.engine.sim.latency import LatencyModel
from timely_core.engine.torch.config import CPU_KV_COST_PROFILE, EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.language.plan_language import PlanStatement
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

SLOW_LINK = CPU_KV_COST_PROFILE.model_copy(update={"swap_bytes_per_s": 1e3})


@dataclass(frozen=True)
class SlowWords(WordLanguage):
    """Each word takes its robot 5 s."""

    def estimate_execution_s(self, statements: Sequence[PlanStatement]) -> tuple[float, float]:
        return 5.0 * len(statements), 5.0 * len(statements)


@pytest.mark.parametrize(
    ("profile", "chosen"),
    [
        (None, HandlingStrategy.SWAP),
        # re-prefills at every segment: slow on a CPU
        pytest.param(SLOW_LINK, HandlingStrategy.DISCARD, marks=pytest.mark.slow),
    ],
)
def test_auto_chosen_strategies_give_the_unsegmented_greedy_output(
    checkpoint: Path,  # noqa: F811
    profile: LatencyModel | None,
    chosen: HandlingStrategy,
) -> None:
    expected = unsegmented(checkpoint)
    engine = TorchEngine(checkpoint, EngineConfig(kv_cost_profile=profile))
    told: list[HandlingStrategy] = []
    suspend = engine.suspend

    def recording(gen_id: int, strategy: HandlingStrategy) -> None:
        told.append(HandlingStrategy(strategy))
        suspend(gen_id, strategy)

    engine.suspend = recording  # type: ignore[method-assign]
    clock = VirtualClock()
    service = PlanningService(
        engine,
        make_tokenizer(),
        policy="infercept",
        clock=clock,
        config=ServiceConfig(max_tokens=MAX_TOKENS, max_segment_tokens=MAX_TOKENS + 1),
    )
    for i in range(len(INSTRUCTIONS)):
        service.register_robot(f"r{i}", SlowWords())
    driver = RobotDriver(service, clock)
    handles = [
        driver.submit_at(0.0, TaskRequest(robot_id=f"r{i}", instruction=instruction))
        for i, instruction in enumerate(INSTRUCTIONS)
    ]
    driver.run()
    for handle, instruction in zip(handles, INSTRUCTIONS, strict=True):
        result = handle.result(timeout_s=0)
        assert result.success, result.error
        assert result.plan_text == expected[instruction]
    assert told and set(told) == {chosen}
    assert len(told) > 2 * len(INSTRUCTIONS)  # it did suspend often
