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


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight two-layer Llama in HF format: enough for the real engine to run."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        eos_token_id=0,
        bos_token_id=1,
    )
    path = tmp_path_factory.mktemp("tiny_llama")
    LlamaForCausalLM(config).save_pretrained(path)
    return path
