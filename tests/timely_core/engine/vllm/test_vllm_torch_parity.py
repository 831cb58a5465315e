"""Greedy output token-identical between the torch engine and vLLM on the planner
checkpoint in float32: 16 prompts of mixed lengths (whole robot prompts and cut ones,
both robot types) arriving at different iterations."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from engine_testkit import drive
from vllm_testkit import robot_prompts

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

GREEDY = SamplingParams(max_tokens=40)


def _mixed_prompts() -> list[list[int]]:
    _, prompts = robot_prompts()
    rng = random.Random(20)
    mixed = list(prompts)  # 11 whole prompts, 1,000+ tokens each
    while len(mixed) < 16:  # and cut ones, 8 to 900 tokens
        source = prompts[rng.randrange(len(prompts))]
        mixed.append(source[: rng.randrange(8, 900)])
    return mixed


def test_greedy_plans_are_token_identical_to_the_torch_engine(
    planner: Path, vllm_engine: Any
) -> None:
    prompts = _mixed_prompts()
    assert len(prompts) == 16 and len({len(p) for p in prompts}) > 8
    arrivals = [0, 0, 1, 2, 2, 3, 5, 8, 9, 13, 14, 20, 21, 30, 31, 35]
    expected = drive(TorchEngine(planner, EngineConfig(num_threads=1)), prompts, GREEDY, arrivals)
    got = drive(vllm_engine, prompts, GREEDY, arrivals)
    assert [len(g) - len(p) for g, p in zip(got, prompts, strict=True)] == [
        len(e) - len(p) for e, p in zip(expected, prompts, strict=True)
    ]
    assert got == expected
