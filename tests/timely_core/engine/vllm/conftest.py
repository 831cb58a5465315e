"""Fixtures of the vLLM engine tests: the planner checkpoint, its robots' prompts,
and one in-process vLLM engine per test module (vLLM's caches: tests/conftest.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from vllm_fake_server_testkit import FakeVllmServer
from vllm_testkit import PLANNER


@pytest.fixture(scope="session")
def planner() -> Path:
    if not (PLANNER / "model.safetensors").is_file():
        pytest.fail(f"the planner checkpoint is missing at {PLANNER}: python -m robot_models.train")
    return PLANNER


@pytest.fixture(scope="module")
def vllm_engine(planner: Path) -> Iterator[object]:
    from timely_core.engine.vllm.config import VllmConfig
    from timely_core.engine.vllm.engine import VllmEngine

    engine = VllmEngine(planner, VllmConfig(max_num_seqs=32))
    yield engine
    engine.close()  # before the next module builds its own (see VllmEngine.close)


@pytest.fixture
def fakes() -> Iterator[Callable[..., FakeVllmServer]]:
    """Start fake servers; each is stopped after the test."""
    started: list[FakeVllmServer] = []

    def start(**kwargs: object) -> FakeVllmServer:
        server = FakeVllmServer(PLANNER, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.die()
