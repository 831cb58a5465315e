"""Lazy sharing for a fleet variant's full fine-tune: calibration prompts from the
variant's training examples, quality from its held-out examples (the evaluation the
LoRA variants are scored on: exact and valid plans, greedy, HF transformers)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from robot_models.blocks.lazy_share import LazyShareResult, lazy_share
from robot_models.blocks.logit_lens import calibration_set
from robot_models.variants.data import variant_data
from robot_models.variants.full_tune import FullTuneConfig
from robot_models.variants.score import VariantScore, score
from robot_models.variants.spec import variant_spec
from timely_core.blocks.zoo import BlockZoo, BlockZooError


def share_fleet_variant(
    zoo: BlockZoo,
    variant: str,
    base: str,
    fleet_variant: str,
    threshold: float = 0.98,
    tolerance: int = 0,
    calibration_examples: int = 16,
) -> LazyShareResult:
    """Run lazy sharing of zoo variant `variant` against `base`, judged on the data
    of `fleet_variant` (fleet.yaml), drawn as its fine-tune drew them."""
    try:
        spec = variant_spec(fleet_variant)
    except KeyError as error:
        raise BlockZooError(str(error.args[0])) from error
    config = FullTuneConfig()
    data = variant_data(spec, config.train_examples, config.heldout_examples, config.seed)
    files = zoo.manifest(variant).files
    for needed in ("tokenizer.json", "config.json"):
        if needed not in files:
            raise BlockZooError(f"variant {variant!r} has no {needed} in the zoo")
    tokenizer = Tokenizer.from_file(str(zoo.files_dir / files["tokenizer.json"]))
    eos_id = int(json.loads((zoo.files_dir / files["config.json"]).read_text())["eos_token_id"])
    calibration = calibration_set(tokenizer, data.train[:calibration_examples], eos_id)

    def evaluate(folder: Path) -> VariantScore:
        return score(folder, None, data.heldout)

    return lazy_share(zoo, variant, base, calibration, evaluate, threshold, tolerance)


def result_record(result: LazyShareResult) -> dict[str, Any]:
    return asdict(result)


def result_table(result: LazyShareResult) -> str:
    def fmt(s: VariantScore | None) -> str:
        return "-" if s is None else f"{s.exact}/{s.total} exact, {s.valid} valid"

    lines = [
        f"{result.variant} vs {result.base}, threshold {result.threshold}: "
        f"unshared {fmt(result.unshared)}; final {fmt(result.final)}",
        "block\tsimilarity\tdecision\teval with the block shared",
    ]
    lines += [
        f"{d.block}\t{d.similarity:.6f}\t{d.decision}\t{fmt(d.score_shared)}"
        for d in result.decisions
    ]
    return "\n".join(lines)
