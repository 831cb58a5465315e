"""The logit-lens equivalence test and lazy partitioning, on cases whose answer is
known: a block equal to the base's scores 1, a barely changed block is shared and
quality holds, a heavily perturbed block is not equivalent, and when tried anyway
(threshold 0) the variant's evaluation drops and the sharing is reverted."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from robot_models.blocks.lazy_share import differing_blocks, lazy_share
from robot_models.blocks.logit_lens import CalibrationSequence, block_similarities, calibration_set
from robot_models.checkpoints import CHECKPOINT_DIR, default_planner_path
from robot_models.dataset import Example, generate
from robot_models.plan_check import check_plan
from robot_models.reference_planner import ReferencePlanner
from robot_models.training.hf_format import load_checkpoint
from robot_models.variants.score import VariantScore
from tests.robot_models.blocks_support import planner_copy
from timely_core.blocks.zoo import BlockZoo, BlockZooError

PLANNER = default_planner_path()


def _perturb(tensors: dict[str, torch.Tensor]) -> None:
    """layers.3.ffn ruined, layers.2.attention nudged by one part in a million."""
    generator = torch.Generator().manual_seed(0)
    for name in list(tensors):
        t = tensors[name]
        if name.startswith("model.layers.3.mlp."):
            tensors[name] = t + 0.5 * torch.randn(t.shape, generator=generator)
        elif name.startswith("model.layers.2.self_attn."):
            tensors[name] = t * (1 + 1e-6 * torch.randn(t.shape, generator=generator))


@pytest.fixture(scope="module")
def perturbed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planner_copy(tmp_path_factory.mktemp("perturbed") / "planner", _perturb)


@pytest.fixture(scope="module")
def examples() -> list[Example]:
    """Four drone tasks with short plans: each evaluation decodes them in one batch."""
    drawn = generate("drone", 40, random.Random(7))
    return sorted(drawn, key=lambda e: len(e.plan))[10:14]


def _score(folder: Path, examples: list[Example]) -> VariantScore:
    """Exact and valid plans, greedy, at most 32 tokens (these plans are shorter; a
    ruined model would otherwise write 256 tokens per plan)."""
    requests = [(e.scene, e.instruction) for e in examples]
    plans = ReferencePlanner(folder).plan_batch("drone", requests, max_new_tokens=32)
    exact = sum(plan == e.plan for (plan, _), e in zip(plans, examples, strict=True))
    valid = sum(check_plan("drone", p, ended).valid for p, ended in plans)
    return VariantScore(len(examples), exact, valid)


def _calibration(examples: list[Example]) -> list[CalibrationSequence]:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    return calibration_set(tokenizer, examples[:2], eos_id=0)


def test_similarity_is_one_for_an_equal_block_and_low_for_a_ruined_one(
    perturbed: Path,
    examples: list[Example],
) -> None:
    similarity = block_similarities(
        load_checkpoint(PLANNER),
        load_checkpoint(perturbed),
        _calibration(examples),
        ["layers.1.attention", "layers.2.attention", "layers.3.ffn", "lm_head", "embedding"],
    )
    assert similarity["layers.1.attention"] == pytest.approx(1.0, abs=1e-12)
    assert similarity["lm_head"] == pytest.approx(1.0, abs=1e-12)
    assert similarity["embedding"] == pytest.approx(1.0, abs=1e-12)
    assert similarity["layers.2.attention"] > 0.999
    assert similarity["layers.3.ffn"] < 0.9
    with pytest.raises(ValueError, match="no such block in a 4-layer model"):
        block_similarities(
            load_checkpoint(PLANNER),
            load_checkpoint(perturbed),
            _calibration(examples),
            ["layers.9.ffn"],
        )


def test_lazy_sharing_keeps_equivalent_blocks_and_reverts_when_quality_drops(
    tmp_path: Path,
    perturbed: Path,
    examples: list[Example],
) -> None:
    zoo = BlockZoo(tmp_path / "zoo")
    zoo.add("base", perturbed)
    zoo.add("variant", PLANNER, base="base")
    assert differing_blocks(zoo, "variant", "base") == ["layers.2.attention", "layers.3.ffn"]
    calls: list[Path] = []

    def evaluate(folder: Path) -> VariantScore:
        calls.append(folder)
        return _score(folder, examples)

    result = lazy_share(zoo, "variant", "base", _calibration(examples), evaluate, threshold=0.98)
    decisions = {d.block: d for d in result.decisions}
    assert decisions["layers.2.attention"].decision == "shared"
    assert decisions["layers.3.ffn"].decision == "not equivalent"
    assert decisions["layers.3.ffn"].score_shared is None
    assert result.final == result.unshared and result.unshared.valid > 0
    assert len(calls) == 2  # the fine-tune as trained, then the one try
    manifest = zoo.manifest("variant")
    assert (
        manifest.block("layers.2.attention").hash
        == zoo.manifest("base").block("layers.2.attention").hash
    )
    assert [b.name for b in manifest.shared_blocks] == ["layers.2.attention"]
    served = zoo.variant_tensors("variant")
    base_tensors = zoo.variant_tensors("base")
    assert (
        served["model.layers.2.self_attn.q_proj.weight"]
        == base_tensors["model.layers.2.self_attn.q_proj.weight"]
    )
    assert (
        served["model.layers.3.mlp.up_proj.weight"]
        != base_tensors["model.layers.3.mlp.up_proj.weight"]
    )

    # tried regardless of the lens, the ruined block costs quality and is reverted
    forced = lazy_share(zoo, "variant", "base", _calibration(examples), evaluate, threshold=0.0)
    decisions = {d.block: d for d in forced.decisions}
    assert decisions["layers.3.ffn"].decision == "reverted"
    tried = decisions["layers.3.ffn"].score_shared
    assert tried is not None and tried.valid < forced.unshared.valid
    assert [b.name for b in zoo.manifest("variant").shared_blocks] == ["layers.2.attention"]
    assert forced.final == decisions["layers.2.attention"].score_shared


def test_only_full_fine_tunes_are_partitioned_lazily(tmp_path: Path) -> None:
    zoo = BlockZoo(tmp_path / "zoo")
    zoo.add("base", PLANNER)
    zoo.add("lora", CHECKPOINT_DIR / "variants" / "heavy-drone", base="base")
    with pytest.raises(BlockZooError, match="'lora' is a lora adapter, not a full fine-tune"):
        differing_blocks(zoo, "lora", "base")
