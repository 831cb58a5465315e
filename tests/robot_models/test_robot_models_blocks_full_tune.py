"""The full fine-tune of the last layers as a fleet variant: a short run changes
only the blocks it trains (so the zoo stores only those), HF loads it, and the
shipped `warehouse-drone-full` beats the base on the variant's held-out set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robot_models.blocks.lazy_share import differing_blocks
from robot_models.checkpoints import default_planner_path
from robot_models.reference_planner import ReferencePlanner
from robot_models.training.hf_format import load_checkpoint
from robot_models.variants.data import variant_data
from robot_models.variants.full_tune import FullTuneConfig, full_tune, trainable_parameters
from robot_models.variants.score import score
from robot_models.variants.spec import VARIANTS_DIR, variant_spec
from timely_core.blocks.zoo import BlockZoo

PLANNER = default_planner_path()
SHIPPED = VARIANTS_DIR / "warehouse-drone-full"


def test_short_full_tune_changes_only_its_blocks(tmp_path: Path) -> None:
    data = variant_data(variant_spec("warehouse-drone"), 8, 2, 1)
    config = FullTuneConfig(steps=2, batch_size=2, threads=1)
    lines: list[str] = []
    out = tmp_path / "tuned"
    stats = full_tune(PLANNER, "drone", data, out, config, log=lines.append)
    assert stats["steps_done"] == 2 and any("step    1/2" in line for line in lines)
    assert (out / "tokenizer.json").read_bytes() == (PLANNER / "tokenizer.json").read_bytes()
    ReferencePlanner(out)  # HF transformers loads it
    zoo = BlockZoo(tmp_path / "zoo")
    zoo.add("base", PLANNER)
    added = zoo.add("tuned", out, base="base")
    changed = [
        "layers.3.input_norm",
        "layers.3.attention",
        "layers.3.post_attention_norm",
        "layers.3.ffn",
        "lm_head",
    ]
    assert differing_blocks(zoo, "tuned", "base") == changed
    assert added.new_blocks == len(changed)


def test_layer_count_is_checked() -> None:
    model = load_checkpoint(PLANNER)
    with pytest.raises(ValueError, match="layers must be 1 to 4"):
        trainable_parameters(model, FullTuneConfig(layers=5))
    with pytest.raises(ValueError, match="layers must be 1 to 4"):
        trainable_parameters(model, FullTuneConfig(layers=0, lm_head=False))


def test_shipped_full_tune_beats_the_base_on_its_heldout_set() -> None:
    """Re-scores the shipped fine-tune (the base's figure is eval.json's, measured in
    the same run as the fine-tune's)."""
    figures = json.loads((SHIPPED / "eval.json").read_text())
    config = FullTuneConfig()
    data = variant_data(
        variant_spec("warehouse-drone"), config.train_examples, config.heldout_examples, config.seed
    )
    tuned = score(SHIPPED, None, data.heldout)
    assert (tuned.exact, tuned.valid) == (
        figures["full_tune"]["exact"],
        figures["full_tune"]["valid"],
    )
    assert tuned.exact > figures["base"]["exact"]
