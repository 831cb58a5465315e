"""The planner with its heads widened to 64 (what FlashInfer serves on GPU hosts)
on vLLM gives the torch engine's greedy tokens on the original planner, for the base
and for fleet variants widened with it; an attention backend that cannot serve the
checkpoint is refused before vLLM builds anything, naming why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_testkit import drive
from vllm_testkit import SERVED, VARIANTS, assert_variants_equal_torch, robot_prompts

from robot_models.checkpoints.widen_heads import widen
from timely_core.engine.protocol import EngineError, SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.vllm.config import VllmConfig
from timely_core.engine.vllm.engine import VllmEngine

GREEDY = SamplingParams(max_tokens=40)


@pytest.fixture(scope="module")
def widened_engine(planner: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmEngine]:
    folder = tmp_path_factory.mktemp("widened")
    base = widen(planner, folder / "planner", 64)
    engine = VllmEngine(base, VllmConfig(max_num_seqs=16, max_loras=2, max_lora_rank=8))
    for name in SERVED:
        engine.load_adapter(name, widen(VARIANTS / name, folder / name, 64, base=planner))
    yield engine
    engine.close()  # before the next module builds its own (see VllmEngine.close)


def test_widened_planner_decodes_as_the_original_on_the_torch_engine(
    planner: Path, widened_engine: VllmEngine
) -> None:
    _, prompts = robot_prompts()
    mixed = [*prompts[:6], prompts[6][:300], prompts[7][:40]]
    arrivals = [0, 0, 1, 3, 4, 8, 9, 15]
    expected = drive(TorchEngine(planner, EngineConfig(num_threads=1)), mixed, GREEDY, arrivals)
    assert drive(widened_engine, mixed, GREEDY, arrivals) == expected


def test_widened_variants_decode_as_the_originals(
    planner: Path, widened_engine: VllmEngine
) -> None:
    assert_variants_equal_torch(planner, widened_engine)


def _narrow_checkpoint(tmp_path: Path, planner: Path, head_dim: int) -> Path:
    folder = tmp_path / f"hd{head_dim}"
    folder.mkdir()
    config = json.loads((planner / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "head_dim": head_dim}))
    return folder


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ("NOT_A_BACKEND", "'NOT_A_BACKEND' is not one vLLM"),
        ("FLASHINFER", "FLASHINFER attention backend cannot load on this host .*flashinfer"),
        ("TRITON_ATTN", "TRITON_ATTN attention does not serve heads 16 wide"),
    ],
)
def test_a_backend_that_cannot_serve_the_checkpoint_is_refused_naming_why(
    planner: Path, tmp_path: Path, backend: str, message: str
) -> None:
    folder = _narrow_checkpoint(tmp_path, planner, 16)  # no weights: refused before loading
    with pytest.raises(EngineError, match=message):
        VllmEngine(folder, VllmConfig(attention_backend=backend))
