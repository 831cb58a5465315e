"""Which plan candidates the service lets be kept (`candidate_fit.plan_fits`): a plan
whose statements all end within the robot's segment limit and that its language
parses to the end; not one with a statement past the limit, not text the language
rejects, not a plan for a generation the service does not hold."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from robot_models.language import load_language
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.serving.candidate_fit import plan_fits

PLANNER = Path(__file__).resolve().parents[3] / "robot_models" / "checkpoints" / "planner"


def test_a_candidate_fits_when_each_statement_ends_within_the_segment_limit() -> None:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    config = SimulatedEngineConfig(eos_token_id=0, block_size=16, device_blocks=512, host_blocks=0)
    engine = SimulatedEngine(VirtualClock(), LatencyModel(), lambda p: [3, 2, 1], config)
    service = PlanningService(engine, tokenizer, languages={"drone": load_language("drone")})
    service.register_robot("d0", robot_type="drone", max_segment_tokens=12)
    handle = service.submit(TaskRequest(robot_id="d0", instruction="find the red cup"))
    state = service._state
    gen_id = state.generations[handle.task_id].gen_id

    def ids(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    short = ids("o('red cup');tp();")
    long = ids("?sw('red cup')==True{o('red cup');a('red cup');tp();}")
    assert len(long) > 12 >= max(len(ids("o('red cup');")), len(ids("tp();")))
    assert plan_fits(state, gen_id, short)
    assert not plan_fits(state, gen_id, long)  # one statement past the limit
    assert not plan_fits(state, gen_id, ids("o('red cup'"))  # never completed
    assert not plan_fits(state, gen_id, ids("zz();"))  # no skill of the drone's
    assert not plan_fits(state, gen_id + 1000, short)  # not a generation it holds
