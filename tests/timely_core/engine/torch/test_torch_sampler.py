"""Sampling: greedy argmax, nucleus truncation, per-request seeded streams."""

from __future__ import annotations

from pathlib import Path

import torch
from engine_testkit import drive, random_prompts

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.sampler import make_generator, sample


def test_engine_top_p_keeps_only_the_nucleus() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    params = SamplingParams(temperature=1.0, top_p=0.7, seed=0)
    generator = make_generator(params)
    assert generator is not None
    drawn = {sample(logits, [params], [generator])[0] for _ in range(300)}
    assert drawn == {0, 1}


def test_engine_greedy_rows_take_the_argmax() -> None:
    logits = torch.tensor([[0.0, 2.0, 1.0], [5.0, 0.0, 0.0]])
    greedy = SamplingParams()
    assert make_generator(greedy) is None
    assert sample(logits, [greedy, greedy], [None, None]) == [1, 0]


def test_engine_seeded_sampling_ignores_batch_company(qwen2_path: Path) -> None:
    """A seeded generation samples the same tokens alone or among others."""
    prompts = random_prompts(31, 4, 40)
    seeded = SamplingParams(temperature=1.0, top_p=0.95, seed=123, max_tokens=12)
    config = EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
    alone = drive(TorchEngine(qwen2_path, config), prompts[:1], seeded)[0]
    crowd = drive(TorchEngine(qwen2_path, config), prompts, seeded, arrivals=[2, 0, 1, 0])[0]
    assert alone == crowd
    other_seed = SamplingParams(temperature=1.0, top_p=0.95, seed=124, max_tokens=12)
    assert drive(TorchEngine(qwen2_path, config), prompts[:1], other_seed)[0] != alone
