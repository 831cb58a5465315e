"""The project's planner checkpoint (robot_models/checkpoints/planner): greedy plans
for the LRTrace tasks, batched with staggered arrivals and the robots' registered
prompt prefixes, are token-identical to transformers' `generate`."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_testkit import check_memory, drive, hf_greedy

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.loader import load_tokenizer

PLANNER = Path(__file__).resolve().parents[4] / "robot_models" / "checkpoints" / "planner"
MAX_PLAN_TOKENS = 120

pytestmark = pytest.mark.slow


def _prompts(path: Path) -> tuple[dict[str, list[int]], list[tuple[str, list[int]]]]:
    """Each robot's prefix and the LRTrace prompts, tokenized by the prompts.py contract."""
    from robot_models.dataset import LRTRACE_TASKS
    from robot_models.language import load_language

    tokenizer = load_tokenizer(path)

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    prefixes = {r: encode(load_language(r).prompt_prefix()) for r in ("drone", "arm")}
    prompts = [
        (
            task.robot_type,
            prefixes[task.robot_type]
            + encode(load_language(task.robot_type).format_request(task.scene, task.instruction)),
        )
        for task in LRTRACE_TASKS
    ]
    return prefixes, prompts


def check_planner_matches_hf(path: Path, max_tokens: int) -> None:
    """Both robots' prefixes pinned in one engine; each robot's LRTrace prompts arrive
    every other iteration; every plan equals HF greedy `generate`."""
    prefixes, prompts = _prompts(path)
    assert min(len(p) for p in prefixes.values()) >= 1000
    engine = TorchEngine(
        path, EngineConfig(max_batched_tokens=512, num_threads=1, host_kv_bytes=2**22)
    )
    for robot, ids in prefixes.items():
        engine.register_prefix(robot, ids)
    params = SamplingParams(max_tokens=max_tokens)
    for robot in prefixes:
        mine = [ids for r, ids in prompts if r == robot]
        arrivals = list(range(0, 2 * len(mine), 2))
        got = drive(engine, mine, params, arrivals, prefix_id=robot)
        assert got == [hf_greedy(path, ids, max_tokens) for ids in mine], robot
        check_memory(engine)


def test_engine_planner_plans_match_hf_with_registered_prefixes() -> None:
    if not (PLANNER / "model.safetensors").is_file():
        pytest.fail(f"the planner checkpoint is missing at {PLANNER}: python -m robot_models.train")
    check_planner_matches_hf(PLANNER, MAX_PLAN_TOKENS)


def test_engine_planner_format_stand_in_matches_hf(tmp_path: Path) -> None:
    """The same check on a random-weight model of the planner's shape, saved by the
    planner's own training code with a tokenizer trained on the robot prompts: the
    checkpoint format and 1,000+-token prompts, whatever the training produces."""
    import torch

    from robot_models.dataset import LRTRACE_TASKS
    from robot_models.language import load_language
    from robot_models.training.hf_format import save_checkpoint
    from robot_models.training.model import LlamaShape, TinyLlama
    from robot_models.training.tokenizer import save_tokenizer, special_id, train_tokenizer

    corpus = [load_language(r).prompt_prefix() for r in ("drone", "arm")]
    corpus += [
        load_language(t.robot_type).format_request(t.scene, t.instruction) for t in LRTRACE_TASKS
    ]
    tokenizer = train_tokenizer(corpus)
    save_tokenizer(tokenizer, tmp_path)
    torch.manual_seed(0)
    model = TinyLlama(LlamaShape(vocab_size=tokenizer.get_vocab_size()))
    save_checkpoint(model, tmp_path, special_id(tokenizer, "<eos>"), special_id(tokenizer, "<pad>"))
    check_planner_matches_hf(tmp_path, 12)
