"""An observation lands between statements even when the token that completed the
calling statement also decoded text past it (`');}?` of the planner's tokenizer, in
`pl('tray');}?lk('mug')`): the token is split around the observation, the plan text is
unchanged, and the planner is asked what follows the observation at the statement's
end. And a tool of skills the robot's plans never call is refused by name (simulated
engine, the shipped planner's tokenizer and the arm's plan language)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from robot_models.language import load_language
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.engine.torch.loader import load_tokenizer
from timely_core.request import TaskRequest
from timely_core.service import PlanningService

PLANNER = Path(__file__).resolve().parents[3] / "robot_models" / "checkpoints" / "planner"
TOKENIZER = load_tokenizer(PLANNER)
PLAN = "hm();?lk('cup')==True{pk('cup');pl('tray');}?lk('mug')==True{pk('mug');}hm();"
LOOK = {
    "name": "eyes",
    "plugin": "robot_models.tools.perception:ScenePerception",
    "options": {"robot_type": "arm", "validates": True},
    "append_observations": True,
}


class Planner:
    """Writes PLAN; after an observation, the rest of PLAN from where it stands."""

    def __init__(self) -> None:
        self.contexts: list[str] = []

    def __call__(self, ids: Sequence[int]) -> list[int]:
        text = TOKENIZER.decode(list(ids))
        written = text.rsplit("Plan:\n", 1)[1]
        self.contexts.append(written)
        plan_so_far = re.sub(r"\n[^\n]*\n", "", written)  # observations are not plan
        assert PLAN.startswith(plan_so_far), written
        return list(TOKENIZER.encode(PLAN[len(plan_so_far) :], add_special_tokens=False).ids)


def _service(planner: Planner) -> PlanningService:
    clock = VirtualClock()
    engine = SimulatedEngine(clock, LatencyModel(), planner, SimulatedEngineConfig(eos_token_id=0))
    service = PlanningService(
        engine, TOKENIZER, clock=clock, languages={"arm": load_language("arm")}
    )
    service.register_robot("arm1", robot_type="arm")
    return service


def test_an_observation_after_a_block_lands_at_its_end() -> None:
    pieces = [TOKENIZER.decode([i]) for i in TOKENIZER.encode(PLAN).ids]
    assert "');}?" in pieces  # one token ends the block and starts the next statement
    planner = Planner()
    service = _service(planner)
    try:
        service.register_tool("arm1", LOOK)
        handle = service.submit(
            TaskRequest(robot_id="arm1", instruction="tidy up", scene="a cup, a tray")
        )
        service.run_until_idle()
        result = handle.result(timeout_s=0)
        assert result.success, result.error
        assert result.plan_text == PLAN
        observed = planner.contexts[1]  # asked after the first observation
        assert observed.endswith("pl('tray');}\nlk('cup')->True\n?"), observed
    finally:
        service.close_tools()


def test_a_tool_of_skills_the_robot_never_calls_is_refused() -> None:
    service = _service(Planner())
    try:
        spec = {
            "name": "pick-check",
            "plugin": "robot_models.tools.perception:ScenePerception",
            "options": {"robot_type": "drone"},
        }
        with pytest.raises(ValueError, match=r"consumes .*'iv'.*which its plans never call"):
            service.register_tool("arm1", spec)  # the drone's perception skills
        assert service.register_tool("arm1", LOOK).skills
    finally:
        service.close_tools()
