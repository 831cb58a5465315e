"""Seeded generation of the planner's data set, with a held-out split."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Literal

from robot_models.dataset.arm_frames import ARM_FRAMES
from robot_models.dataset.arm_templates import ARM_TEMPLATES
from robot_models.dataset.decontaminate import contaminated
from robot_models.dataset.drone_frames import DRONE_FRAMES
from robot_models.dataset.drone_templates import DRONE_TEMPLATES
from robot_models.dataset.example import Example
from robot_models.dataset.frames_lexicon import frames_lexicon
from robot_models.dataset.lexicon import Lexicon
from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS

Generator = Literal["templates", "frames", "mixed"]
GENERATORS: tuple[Generator, ...] = ("templates", "frames", "mixed")
DEFAULT_SEED = 20240601
DEFAULT_PER_TYPE = 4000  # distinct examples: the planner learns to copy rather than memorise
HELDOUT_PER_TYPE = 150

_TEMPLATES: dict[str, tuple[tuple[Callable[[random.Random], Example], int], ...]] = {
    "drone": DRONE_TEMPLATES,
    "arm": ARM_TEMPLATES,
}
_FRAMES: dict[str, tuple[tuple[Callable[[random.Random, Lexicon], Example], int], ...]] = {
    "drone": DRONE_FRAMES,
    "arm": ARM_FRAMES,
}
_QUOTED = re.compile(r"'([^']*)'")


def check_generator(generator: str) -> None:
    if generator not in GENERATORS:
        raise ValueError(f"unknown data generator {generator!r} (allowed: {', '.join(GENERATORS)})")


@cache
def _all_words() -> frozenset[str]:
    """Every word list of the lexicon, both splits: blanked when decontaminating."""
    words: set[str] = set()
    for split in ("train", "heldout"):
        lex = frames_lexicon(split)
        for value in vars(lex).values():
            items = [w for ws in value.values() for w in ws] if isinstance(value, dict) else value
            words.update(w.lower() for w in items)
    return frozenset(words)


def _drawer(
    robot_type: str, generator: str, split: Literal["train", "heldout"]
) -> Callable[[random.Random], Example]:
    """One random example of `robot_type` per call; frames draw objects from `split`."""
    check_generator(generator)
    if generator == "templates":
        templates = _TEMPLATES[robot_type]
        functions, weights = [t for t, _ in templates], [w for _, w in templates]
        return lambda rng: rng.choices(functions, weights)[0](rng)
    frames = _FRAMES[robot_type]
    frame_functions, frame_weights = [f for f, _ in frames], [w for _, w in frames]
    lex = frames_lexicon(split)

    def draw(rng: random.Random) -> Example:
        while True:
            example = rng.choices(frame_functions, frame_weights)[0](rng, lex)
            names = _QUOTED.findall(example.plan)
            if not contaminated(robot_type, example.instruction, names, _all_words()):
                return example

    return draw


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
    generator: Generator = "templates",
    split: Literal["train", "heldout"] = "train",
) -> list[Example]:
    """`count` distinct examples of `robot_type` (distinct scene and instruction),
    none equal to an LRTrace task's request or to a (scene, instruction) in `exclude`.
    `generator` "frames" draws objects from the lexicon's `split`."""
    draw = _drawer(robot_type, generator, split)
    reserved = {(t.scene, t.instruction) for t in LRTRACE_TASKS} | (exclude or set())
    seen: set[tuple[str, str]] = set()
    examples: list[Example] = []
    attempts = 0
    while len(examples) < count:
        attempts += 1
        if attempts > count * 50:
            raise RuntimeError(f"templates of {robot_type} cannot make {count} distinct examples")
        example = draw(rng)
        key = (example.scene, example.instruction)
        if key in seen or key in reserved:
            continue
        seen.add(key)
        examples.append(example)
    return examples


def build_dataset(
    seed: int = DEFAULT_SEED,
    per_type: int = DEFAULT_PER_TYPE,
    extra_per_type: int = 0,
    generator: Generator = "templates",
) -> DatasetSplit:
    """Deterministic for a given seed: the same examples and the same split.

    `extra_per_type` more training examples per robot type come from a second random
    stream, distinct from all others, so adding them leaves the held-out split (and
    the first `per_type` examples) exactly as they were. With the "frames" generator
    the held-out examples name only the lexicon's held-out objects (never trained)."""
    if generator == "frames":
        return _build_frames(seed, per_type, extra_per_type)
    check_generator(generator)
    if generator == "mixed":
        return _build_mixed(seed, per_type, extra_per_type)
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


def _build_mixed(seed: int, per_type: int, extra_per_type: int) -> DatasetSplit:
    """The templates' split (held-out unchanged), with as many frames examples again
    in training: the templates' plans and numbers, the frames' phrasing and objects."""
    templates = build_dataset(seed, per_type, extra_per_type, "templates")
    rng = random.Random(seed + 3)
    taken = {(e.scene, e.instruction) for e in (*templates.train, *templates.heldout)}
    frames = [
        example
        for robot_type in ("drone", "arm")
        for example in generate(robot_type, per_type, rng, taken, "frames")
    ]
    return DatasetSplit(templates.train + tuple(frames), templates.heldout, templates.lrtrace)


def _build_frames(seed: int, per_type: int, extra_per_type: int) -> DatasetSplit:
    rng, heldout_rng = random.Random(seed), random.Random(seed + 2)
    train: list[Example] = []
    heldout: list[Example] = []
    for robot_type in ("drone", "arm"):
        train.extend(generate(robot_type, per_type, rng, generator="frames"))
        heldout.extend(
            generate(robot_type, HELDOUT_PER_TYPE, heldout_rng, generator="frames", split="heldout")
        )
    if extra_per_type:
        extra_rng = random.Random(seed + 1)
        taken = {(e.scene, e.instruction) for e in train}
        for robot_type in ("drone", "arm"):
            train.extend(generate(robot_type, extra_per_type, extra_rng, taken, "frames"))
    lrtrace = tuple(task.example() for task in LRTRACE_TASKS)
    return DatasetSplit(tuple(train), tuple(heldout), lrtrace)
