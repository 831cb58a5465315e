"""Seeded generation of the planner's data set, with a held-out split."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from robot_models.dataset.arm_templates import ARM_TEMPLATES
from robot_models.dataset.drone_templates import DRONE_TEMPLATES
from robot_models.dataset.example import Example
from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS

DEFAULT_SEED = 20240601
DEFAULT_PER_TYPE = 4000  # distinct examples: the planner learns to copy rather than memorise
HELDOUT_PER_TYPE = 150

_TEMPLATES: dict[str, tuple[tuple[Callable[[random.Random], Example], int], ...]] = {
    "drone": DRONE_TEMPLATES,
    "arm": ARM_TEMPLATES,
}


@dataclass(frozen=True)
class DatasetSplit:
    train: tuple[Example, ...]  # generated training examples (LRTrace tasks not included)
    heldout: tuple[Example, ...]  # never seen in training
    lrtrace: tuple[Example, ...]  # the 11 LRTrace tasks (trained on, evaluated exactly)


def generate(
    robot_type: str,
    count: int,
    rng: random.Random,
    exclude: set[tuple[str, str]] | None = None,
) -> list[Example]:
    """`count` distinct examples of `robot_type` (distinct scene and instruction),
    none equal to an LRTrace task's request or to a (scene, instruction) in `exclude`."""
    templates = _TEMPLATES[robot_type]
    functions = [t for t, _ in templates]
    weights = [w for _, w in templates]
    reserved = {(t.scene, t.instruction) for t in LRTRACE_TASKS} | (exclude or set())
    seen: set[tuple[str, str]] = set()
    examples: list[Example] = []
    attempts = 0
    while len(examples) < count:
        attempts += 1
        if attempts > count * 50:
            raise RuntimeError(f"templates of {robot_type} cannot make {count} distinct examples")
        example = rng.choices(functions, weights)[0](rng)
        key = (example.scene, example.instruction)
        if key in seen or key in reserved:
            continue
        seen.add(key)
        examples.append(example)
    return examples


def build_dataset(
    seed: int = DEFAULT_SEED, per_type: int = DEFAULT_PER_TYPE, extra_per_type: int = 0
) -> DatasetSplit:
    """Deterministic for a given seed: the same examples and the same split.

    `extra_per_type` more training examples per robot type come from a second random
    stream, distinct from all others, so adding them leaves the held-out split (and
    the first `per_type` examples) exactly as they were."""
    rng = random.Random(seed)
    train: list[Example] = []
    heldout: list[Example] = []
    for robot_type in ("drone", "arm"):
        examples = generate(robot_type, per_type, rng)
        cut = min(HELDOUT_PER_TYPE, len(examples) // 10)
        heldout.extend(examples[:cut])
        train.extend(examples[cut:])
    if extra_per_type:
        extra_rng = random.Random(seed + 1)
        taken = {(e.scene, e.instruction) for e in (*train, *heldout)}
        for robot_type in ("drone", "arm"):
            train.extend(generate(robot_type, extra_per_type, extra_rng, taken))
    lrtrace = tuple(task.example() for task in LRTRACE_TASKS)
    return DatasetSplit(tuple(train), tuple(heldout), lrtrace)
