"""Plans that react on the shipped planner with the service's defaults (the plan
grammar on): a perception tool's answers and a robot's failure are appended to the
generation in place (one engine rewrite each), the grammar does not read them, and
the plan goes on after them, valid. Before observations were skipped by the
grammar, the tool's answer ended the task and the failure was re-admitted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.language import load_language
from robot_models.plan_check import check_plan
from tests.timely_core.core_support import run_reporting_segments
from timely_core.clock import VirtualClock
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.events import Rollback, Segment
from timely_core.language.plan_language import PlanLanguage
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

PERCEPTION = "robot_models.tools.perception:ScenePerception"
SCENE = "a sofa, a cat under the table"


@pytest.fixture
def planner() -> Iterator[tuple[PlanningService, TorchEngine]]:
    path = default_planner_path()
    if not (path / "model.safetensors").is_file():
        pytest.fail(f"the planner checkpoint is missing at {path}: python -m robot_models.train")
    languages: dict[str, PlanLanguage] = {"drone": load_language("drone")}
    engine = TorchEngine(Path(path), EngineConfig())
    service = PlanningService(
        engine,
        Tokenizer.from_file(str(path / "tokenizer.json")),
        "timely",
        clock=VirtualClock(),
        languages=languages,
    )
    assert service.config.grammar  # the default under test
    service.register_robot("drone1", robot_type="drone")
    yield service, engine
    service.close_tools()


def check_valid(plan_text: str) -> None:
    assert "->" not in plan_text  # no observation reaches the plan text
    check = check_plan("drone", plan_text)
    assert check.valid and check.right_skills, (plan_text, check.error)


def test_a_perception_answer_is_appended_and_the_plan_goes_on_valid(
    planner: tuple[PlanningService, TorchEngine],
) -> None:
    service, engine = planner
    service.register_tool(
        "drone1",
        {
            "name": "look",
            "plugin": PERCEPTION,
            "append_observations": True,
            "options": {"robot_type": "drone", "validates": True},
        },
    )
    handle = service.submit(
        TaskRequest(
            robot_id="drone1", instruction="Find the cat and take a picture of it", scene=SCENE
        )
    )
    run_reporting_segments(service, handle)
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    outcomes = service.tool_outcomes(handle.task_id)
    assert [o.kind for o in outcomes] and {o.kind for o in outcomes} == {"observation"}
    assert engine.rewrites == 1  # the answers went in at the end of their segment
    check_valid(result.plan_text)
    assert "".join(s.text for s in handle.segments(timeout_s=0)) == result.plan_text


def test_a_robot_failure_is_rolled_back_in_place_and_the_plan_goes_on_valid(
    planner: tuple[PlanningService, TorchEngine],
) -> None:
    service, engine = planner
    handle = service.submit(
        TaskRequest(
            robot_id="drone1",
            instruction="Take off, fly forward 2 meters, then land",
            scene=SCENE,
            replan_on_failure=True,
        )
    )
    seen: list[Rollback | None] = []

    def fail_first(segment: Segment) -> None:
        """The robot fails segment 0 as it gets it: the plan is still being written."""
        if segment.index == 0 and not seen:
            seen.append(handle.segment_failed(0, "no response from the drone"))

    handle.on_segment(fail_first)
    run_reporting_segments(service, handle)
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    [rollback] = seen
    assert isinstance(rollback, Rollback) and rollback.failed_index == 0
    assert engine.rewrites == 1  # the grammar took the observation: no re-admission
    check_valid(result.plan_text)


def test_plan_candidates_refuse_a_tool_whose_answers_join_the_plan() -> None:
    """A plan chosen among candidates holds no KV to append an answer to: the tool
    is refused when registered, not every task at its first answer."""
    path = default_planner_path()
    service = PlanningService(
        TorchEngine(Path(path), EngineConfig()),
        Tokenizer.from_file(str(path / "tokenizer.json")),
        "timely",
        clock=VirtualClock(),
        config=ServiceConfig(plan_candidates=2),
        languages={"drone": load_language("drone")},
    )
    service.register_robot("drone1", robot_type="drone")
    look = {
        "name": "look",
        "plugin": PERCEPTION,
        "append_observations": True,
        "options": {"robot_type": "drone", "validates": True},
    }
    with pytest.raises(ValueError, match=r"append_observations cannot be used with plan cand"):
        service.register_tool("drone1", look)
    service.register_tool("drone1", {**look, "append_observations": False})  # answers kept
    service.close_tools()
