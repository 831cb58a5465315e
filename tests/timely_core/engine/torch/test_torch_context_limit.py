"""The model's context (`max_position_embeddings`) bounds a generation in the torch
engine: past it rotary positions are ones the planner never saw and its output is
noise. A prompt that fills it is refused, naming it; a generation that reaches it
finishes there, as at `max_tokens`; a rewrite past it is refused. The service
refuses a request whose prompt leaves no room for a plan (PromptTooLong) and cuts a
plan's token budget to the room left, so it closes within the context."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from robot_models.language import load_language
from timely_core.clock import MonotonicClock
from timely_core.engine.protocol import EngineError, HandlingStrategy, SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.errors import PromptTooLong
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.serving.iteration import within_context

PLANNER = Path(__file__).resolve().parents[4] / "robot_models" / "checkpoints" / "planner"


@pytest.fixture(scope="module")
def engine() -> TorchEngine:
    return TorchEngine(PLANNER, EngineConfig(num_threads=1))


def test_the_engine_knows_the_checkpoints_context(engine: TorchEngine) -> None:
    assert engine.max_model_len == 2048  # the planner's config.json


def test_a_generation_ends_at_the_context_and_no_prompt_fills_it(engine: TorchEngine) -> None:
    engine.max_model_len = 40  # a small context, so the test decodes a few tokens
    try:
        with pytest.raises(ValueError, match="prompt of generation 1 has 40 tokens; the model's"):
            engine.add(1, [5] * 40, SamplingParams(max_tokens=100))
        engine.add(2, [5] * 30, SamplingParams(max_tokens=100))
        tokens = []
        while True:
            (out,) = engine.step([2])
            tokens.append(out.token_id)
            if out.finished:
                break
        # ended at the context (40 tokens), not at EOS nor at max_tokens
        assert len(tokens) == 10 and engine.eos_token_id not in tokens
        engine.add(3, [5] * 30, SamplingParams(max_tokens=100))
        engine.step([3])
        engine.suspend(3, HandlingStrategy.PRESERVE)
        with pytest.raises(EngineError, match="would hold 41 tokens after the rewrite"):
            engine.rewrite(3, 1, [5] * 10)
        engine.abort(3)
    finally:
        engine.max_model_len = 2048


def test_a_plans_budget_is_what_the_context_leaves() -> None:
    params = SamplingParams(max_tokens=256)

    class Engine:
        max_model_len = 2048

    assert within_context(params, 1900, Engine()).max_tokens == 148
    assert within_context(params, 100, Engine()) is params
    assert within_context(params, 1900, object()) is params  # no context known


def test_the_service_refuses_a_prompt_that_leaves_no_room_for_a_plan(
    engine: TorchEngine,
) -> None:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    service = PlanningService(
        engine, tokenizer, policy="timely", clock=MonotonicClock(), config=ServiceConfig()
    )
    try:
        drone = load_language("drone")
        service.register_robot("drone1", drone)
        # the drone's prompt prefix is most of the 2048 positions: a long scene
        # (within max_prompt_tokens, 4096) leaves no room for a plan
        scene = "visible: " + ", ".join(f"box {i}" for i in range(120))
        with pytest.raises(PromptTooLong, match="the model's context is 2048 positions"):
            service.check(TaskRequest(robot_id="drone1", instruction="find the cat", scene=scene))
        handle = service.submit(TaskRequest(robot_id="drone1", instruction="take off"))
        service.start()
        assert handle.result(timeout_s=120).success
    finally:
        service.stop()


def test_a_robot_whose_prompt_prefix_leaves_no_room_for_a_segment_is_refused_at_registration(
    engine: TorchEngine,
) -> None:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    service = PlanningService(
        engine, tokenizer, policy="timely", clock=MonotonicClock(), config=ServiceConfig()
    )
    # a streamed drone's prompt (its `fp` path skill, statements of up to 160 tokens)
    # is most of the 2048 positions: every task of it would be refused
    streamed = load_language("drone", streamed_skills=True)
    with pytest.raises(ValueError, match=r"robot 'drone2': its prompt prefix takes \d+ of the "
                       r"model's 2048 positions, which leaves \d+ .* less than a first segment "
                       r"\(160 tokens"):  # fmt: skip
        service.register_robot("drone2", streamed, max_segment_tokens=160)
    with pytest.raises(ValueError, match="robot 'drone1'"):  # a prefix too long on its own
        service.register_robot("drone1", load_language("drone"), prompt_prefix="x " * 2100)
    service.register_robot("drone1", load_language("drone"))  # the plain drone fits
    with pytest.raises(ValueError, match="robot 'drone1'"):  # and so does re-registering
        service.register_robot("drone1", load_language("drone"), max_segment_tokens=400)
