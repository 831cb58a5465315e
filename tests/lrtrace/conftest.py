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
