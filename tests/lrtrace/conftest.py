"""A real BPE tokenizer trained (seconds) on the robots' prompts and the LRTrace plans,
so simulator tests do not depend on the planner checkpoint being present."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tokenizer_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from robot_models.dataset import LRTRACE_TASKS
    from robot_models.prompts import format_request, prompt_prefix
    from robot_models.training.tokenizer import train_tokenizer

    corpus = [prompt_prefix("drone"), prompt_prefix("arm")]
    corpus += [format_request(t.scene, t.instruction) + t.golden_plan for t in LRTRACE_TASKS] * 5
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_tokenizer(corpus, vocab_size=600).save(str(path))
    return path


@pytest.fixture(scope="session")
def tokenizer(tokenizer_path: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tokenizer_path))


def save_random_llama(path: Path, seed: int, **shape: Any) -> Path:
    """A random-weight Llama in HF format at `path`: enough for the real engine to run."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    LlamaForCausalLM(LlamaConfig(eos_token_id=0, bos_token_id=1, **shape)).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two layers over a 256-token vocabulary."""
    return save_random_llama(
        tmp_path_factory.mktemp("tiny_llama"),
        seed=0,
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
    )


@pytest.fixture(scope="module")
def llama_for_tokenizer(tmp_path_factory: pytest.TempPathFactory, tokenizer: Any) -> Path:
    """One layer over the vocabulary of `tokenizer`, with room for the robots' prefixes."""
    return save_random_llama(
        tmp_path_factory.mktemp("llama_tok"),
        seed=1,
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
    )


@pytest.fixture
def no_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay itself must not start: the error comes first."""
    from lrtrace.replay import runner

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the replay started")

    monkeypatch.setattr(runner, "replay", refuse)
