"""Under the grammar the service closes plans before its limits end them: a plan
whose statement nears the robot's segment limit has its blocks closed at the next
statement boundary and ends there, as a plan nearing `max_tokens` does; a statement
that never ends by itself (a name whose letters the planner repeats) is ended, its
name cut, in the window's last half. Without closing (`grammar_close_within=0`) the
same tasks fail on those limits. Greedy, on the shipped planner."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.language import load_language
from tests.timely_core.serving.grammar_recording import (
    GrammarRecordingEngine,
    recording_service,
)
from timely_core.clock import MonotonicClock
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.events import TaskResult
from timely_core.language.plan_language import PlanLanguage
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

# (scene, instruction): the planner writes each as a block of several statements
BLOCKS = [
    ("visible: shelf, window, sofa, bed", "Look for the teddy bear under the counter"),
    ("visible: chair, window, person, plant", "Is there a book under the cabinet?"),
]
SEGMENT_LIMIT = 16

pytestmark = pytest.mark.slow


def plan(config: ServiceConfig, max_segment_tokens: int | None = None) -> list[TaskResult]:
    path = default_planner_path()
    if not (path / "model.safetensors").is_file():
        pytest.fail(f"the planner checkpoint is missing at {path}: python -m robot_models.train")
    languages: dict[str, PlanLanguage] = {"drone": load_language("drone")}
    service = PlanningService(
        TorchEngine(Path(path), EngineConfig()),
        Tokenizer.from_file(str(path / "tokenizer.json")),
        policy="timely",
        clock=MonotonicClock(),
        config=config,
        languages=languages,
    )
    for i in range(len(BLOCKS)):
        service.register_robot(
            f"drone{i}", robot_type="drone", max_segment_tokens=max_segment_tokens
        )
    service.start()
    try:
        handles = [
            service.submit(TaskRequest(robot_id=f"drone{i}", scene=scene, instruction=text))
            for i, (scene, text) in enumerate(BLOCKS)
        ]
        results = []
        for handle in handles:
            for segment in handle.segments(timeout_s=300):
                handle.segment_done(segment.index)
            results.append(handle.result(timeout_s=300))
        return results
    finally:
        service.stop()


def test_a_block_nearing_the_segment_limit_is_closed_and_the_plan_ends() -> None:
    unclosed = plan(ServiceConfig(grammar_close_within=0), SEGMENT_LIMIT)
    assert all(not r.success and "no complete statement" in r.error for r in unclosed)
    closed = plan(ServiceConfig(grammar_close_within=8), SEGMENT_LIMIT)
    drone = load_language("drone")
    for result in closed:
        assert result.success, (result.plan_text, result.error)
        statements = drone.parse(result.plan_text)  # every block closed, the plan valid
        assert any("{" in s.text for s in statements)
    # with room for the whole block: the planner's own plans, which the closed ones begin
    roomy = plan(ServiceConfig(grammar_close_within=8))
    for short, full in zip(closed, roomy, strict=True):
        assert full.success and len(short.plan_text) < len(full.plan_text)
        opened = short.plan_text.rindex("{") + 1
        assert full.plan_text.startswith(short.plan_text[:opened])


def test_a_plan_nearing_max_tokens_ends_at_a_statement_boundary() -> None:
    unclosed = plan(ServiceConfig(max_tokens=12, grammar_close_within=0))
    assert all(not r.success for r in unclosed)
    closed = plan(ServiceConfig(max_tokens=12, grammar_close_within=12))
    drone = load_language("drone")
    for result in closed:
        assert result.success, (result.plan_text, result.error)
        assert drone.parse(result.plan_text)


def sort_screws(
    arm: PlanLanguage, copy_bias: float = 0.0
) -> tuple[TaskResult, GrammarRecordingEngine]:
    """The one arm task below on the service (default closing and segment limit;
    no copy bias unless given, which would write the names the request gives)."""
    service, engine = recording_service({"arm": arm}, ServiceConfig(copy_bias=copy_bias))
    service.register_robot("arm0", robot_type="arm")
    service.start()
    try:
        handle = service.submit(
            TaskRequest(
                robot_id="arm0",
                scene="on table: m3 screw, m5 screw; bins: m3 bin, m5 bin",
                instruction="sort the m3 screw and m5 screw into their bins",
            )
        )
        for segment in handle.segments(timeout_s=300):
            handle.segment_done(segment.index)
        return handle.result(timeout_s=300), engine
    finally:
        service.stop()


def test_a_statement_repeating_a_name_is_ended_before_the_segment_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The planner writes `so('sastooo...` for this request and never closes the
    name: closing at statement boundaries alone lets it run past the 64-token
    segment limit and the task fails; the hard closers the service passes (the
    language's, as token ids) end the name, call and statement in time."""
    soft_only = load_language("arm")
    monkeypatch.setattr(soft_only, "grammar_hard_closers", lambda: ())
    failed, _ = sort_screws(soft_only)
    assert not failed.success and "no complete statement within 64 tokens" in failed.error
    assert "so('sastoo" in failed.plan_text + failed.error, "no longer loops: pick another"
    arm = load_language("arm")
    result, engine = sort_screws(arm)
    assert result.success, (result.plan_text, result.error)
    assert arm.parse(result.plan_text)
    tokenizer = Tokenizer.from_file(str(default_planner_path() / "tokenizer.json"))
    hard = [tokenizer.encode(t, add_special_tokens=False).ids for t in arm.grammar_hard_closers()]
    assert engine.admitted_params[0].hard_closing_ids == tuple(ids[0] for ids in hard)
