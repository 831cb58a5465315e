"""A variant's examples: the base generator's, rewritten by the variant's spec."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace

from robot_models.dataset import Example, generate
from robot_models.variants.spec import VariantSpec

_MOVE = re.compile(r"\b(m[fblrud])\((\d+)\)")


@dataclass(frozen=True)
class VariantData:
    train: tuple[Example, ...]
    heldout: tuple[Example, ...]  # never trained on


def _words(text: str, mapping: dict[str, str]) -> str:
    """Whole-word replacement, all words at once (so a replacement is never rewritten)."""
    if not mapping:
        return text
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(mapping, key=len)[::-1])) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def rewrite(example: Example, spec: VariantSpec) -> Example:
    """`example` as the variant's robot would be asked it and should plan it."""
    scene = _words(example.scene, spec.rename)
    instruction = _words(_words(example.instruction, spec.rename), spec.instruction_rename)
    plan = _words(example.plan, spec.rename)
    for old, new in spec.plan_rename.items():
        plan = plan.replace(old, new)
    limit = spec.max_distance_cm
    if limit is not None:
        plan = _MOVE.sub(lambda m: f"{m.group(1)}({min(int(m.group(2)), limit)})", plan)
    if example.family in spec.plan_wrap:
        before, after = spec.plan_wrap[example.family]
        plan = before + plan + after
    return replace(example, scene=scene, instruction=instruction, plan=plan)


def variant_data(spec: VariantSpec, train: int, heldout: int, seed: int) -> VariantData:
    """`train` + `heldout` distinct rewritten examples of the variant's families."""
    rng = random.Random(f"{seed}:{spec.name}")
    wanted = train + heldout
    examples: list[Example] = []
    seen: set[tuple[str, str]] = set()
    while len(examples) < wanted:
        for example in generate(spec.robot_type, wanted, rng, exclude=seen):
            seen.add((example.scene, example.instruction))
            if not spec.families or example.family in spec.families:
                examples.append(rewrite(example, spec))
    examples = examples[:wanted]
    return VariantData(tuple(examples[heldout:]), tuple(examples[:heldout]))
