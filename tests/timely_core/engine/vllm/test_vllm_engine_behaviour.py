"""The behavioural engine contract on the planner checkpoint, for the torch engine and
the in-process vLLM engine alike: segments joined equal the unsegmented greedy plan,
suspend/resume with each strategy an engine accepts gives the uninterrupted output,
cancel frees KV at once, bad input ends alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_testkit import drive
from vllm_testkit import drive_segmented, robot_prompts

from timely_core.engine.protocol import (
    FIXED_STRATEGIES,
    Engine,
    EngineError,
    HandlingStrategy,
    SamplingParams,
)
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

GREEDY = SamplingParams(max_tokens=48)
STRATEGIES = {
    "torch": list(FIXED_STRATEGIES),  # auto and ttl are resolved by the service
    "vllm": [HandlingStrategy.PRESERVE, HandlingStrategy.DISCARD],  # swap: GPU hosts only
}


@pytest.fixture(scope="module")
def torch_engine(planner: Path) -> Iterator[TorchEngine]:
    yield TorchEngine(planner, EngineConfig(num_threads=1))


@pytest.fixture(params=["torch", "vllm"])
def engine(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.param}_engine")


def _kind(engine: Engine) -> str:
    return "torch" if isinstance(engine, TorchEngine) else "vllm"


def _prompts() -> list[list[int]]:
    _, prompts = robot_prompts()
    return prompts[:4]


_references: dict[str, list[list[int]]] = {}


def _reference(engine: Engine) -> list[list[int]]:
    kind = _kind(engine)
    if kind not in _references:
        _references[kind] = drive(engine, _prompts(), GREEDY)
    return _references[kind]


def test_reference_plans_are_the_same_on_both_engines(engine: Engine) -> None:
    got = _reference(engine)
    assert all(len(g) > len(p) for g, p in zip(got, _prompts(), strict=True))
    other = _references.get("vllm" if _kind(engine) == "torch" else "torch")
    if other is not None:
        assert got == other


@pytest.mark.parametrize("strategy", FIXED_STRATEGIES)
@pytest.mark.parametrize("every", [1, 7])
def test_segments_joined_equal_the_unsegmented_greedy_plan(
    engine: Engine, strategy: HandlingStrategy, every: int
) -> None:
    if strategy not in STRATEGIES[_kind(engine)]:
        with pytest.raises(EngineError, match="swap"):
            engine.add(900, _prompts()[0], GREEDY)
            try:
                engine.step([900])
                engine.suspend(900, strategy)
            finally:
                engine.abort(900)
        return
    got = drive_segmented(engine, _prompts(), GREEDY, every, strategy, pause=every % 3)
    assert got == _reference(engine)


def test_cancel_frees_kv_at_once(engine: Engine) -> None:
    before = engine.memory().device_blocks_free
    prompts = _prompts()
    for i, prompt in enumerate(prompts[:2]):
        engine.add(200 + i, prompt, GREEDY)
    for _ in range(3):
        engine.step([200, 201])
    assert engine.memory().device_blocks_free < before
    engine.abort(200)
    engine.abort(201)
    assert engine.memory().device_blocks_free == before
    with pytest.raises(EngineError):
        engine.step([200])


def test_bad_input_ends_alone(engine: Engine) -> None:
    prompts = _prompts()
    vocab = 1536
    for bad, match in (([5, vocab, 7], str(vocab)), ([], "empty")):
        with pytest.raises((EngineError, ValueError), match=match):
            engine.add(300, bad, GREEDY)
    with pytest.raises(EngineError, match="prefix"):
        engine.add(301, prompts[0], GREEDY, prefix_id="no such prefix")
    with pytest.raises(EngineError, match="max_generations"):
        engine.step(list(range(400, 400 + engine.max_generations + 1)))
    # the refused generations left nothing behind: the others run as if alone
    assert drive(engine, prompts, GREEDY) == _reference(engine)
