"""Lazy partitioning (BlockLLM §4.3): share a fine-tuned variant's block with the
base's only when the logit lens calls them equivalent and the variant's quality on
its own evaluation set holds with the base's block in place.

Blocks whose similarity reaches the threshold are tried deepest first (the paper
finds sharing late blocks costs least accuracy); each try exports the variant with
the block pointed at the base's, evaluates it, and keeps the sharing or reverts it.
Quality holds when exact and valid plans stay within `tolerance` of the variant's
unshared figures (not of the previous try, so small losses cannot add up).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from robot_models.blocks.export import export_variant
from robot_models.blocks.logit_lens import CalibrationSequence, block_similarities
from robot_models.training.hf_format import load_checkpoint
from robot_models.variants.score import VariantScore
from timely_core.blocks.partition import block_order
from timely_core.blocks.zoo import BlockZoo, BlockZooError

Evaluate = Callable[[Path], VariantScore]  # a checkpoint folder -> its score


@dataclass(frozen=True)
class BlockDecision:
    block: str
    similarity: float
    decision: str  # shared | reverted | not equivalent
    score_shared: VariantScore | None  # the variant with this block shared (if tried)


@dataclass(frozen=True)
class LazyShareResult:
    variant: str
    base: str
    threshold: float
    unshared: VariantScore  # the variant as fine-tuned
    final: VariantScore  # with every kept sharing
    decisions: list[BlockDecision]


def differing_blocks(zoo: BlockZoo, variant: str, base: str) -> list[str]:
    """The variant's blocks that hold other content than the base's."""
    theirs = {b.name: b.hash for b in zoo.manifest(base).blocks}
    mine = zoo.manifest(variant)
    if mine.kind != "checkpoint":
        raise BlockZooError(f"variant {variant!r} is a {mine.kind} adapter, not a full fine-tune")
    missing = [b.name for b in mine.blocks if b.name not in theirs]
    if missing:
        raise BlockZooError(f"base {base!r} has no block {missing[0]!r} of {variant!r}")
    return [b.name for b in mine.blocks if (b.replaced or b.hash) != theirs[b.name]]


def lazy_share(
    zoo: BlockZoo,
    variant: str,
    base: str,
    calibration: Sequence[CalibrationSequence],
    evaluate: Evaluate,
    threshold: float = 0.98,
    tolerance: int = 0,
) -> LazyShareResult:
    for name in list(zoo.manifest(variant).shared_blocks):
        zoo.unshare(variant, name.name)  # start from the fine-tune as trained
    candidates = differing_blocks(zoo, variant, base)
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)

        def exported(name: str) -> Path:
            out = folder / name
            shutil.rmtree(out, ignore_errors=True)  # export refuses a non-empty folder
            return export_variant(zoo, name, out)

        similarity = block_similarities(
            load_checkpoint(exported(variant)),
            load_checkpoint(exported(base)),
            calibration,
            candidates,
        )
        unshared = final = evaluate(exported(variant))
        decisions: dict[str, BlockDecision] = {}
        for block in sorted(candidates, key=block_order, reverse=True):
            if similarity[block] < threshold:
                decisions[block] = BlockDecision(block, similarity[block], "not equivalent", None)
                continue
            zoo.share(variant, block, base)
            tried = evaluate(exported(variant))
            holds = (
                tried.exact >= unshared.exact - tolerance
                and tried.valid >= unshared.valid - tolerance
            )
            if holds:
                final = tried  # every try runs with the sharings kept before it
            else:
                zoo.unshare(variant, block)
            decisions[block] = BlockDecision(
                block, similarity[block], "shared" if holds else "reverted", tried
            )
    ordered = [decisions[b] for b in sorted(candidates, key=block_order)]
    return LazyShareResult(variant, base, threshold, unshared, final, ordered)
