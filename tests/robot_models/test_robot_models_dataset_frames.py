"""The frames generator: valid plans, names copied as written, held-out objects never
trained on, hazards met first, and far more ways of asking than templates."""

from __future__ import annotations

import random
import re
from collections import Counter
from functools import cache
from typing import Literal

import pytest

from robot_models.dataset import Example, build_dataset, generate
from robot_models.dataset.decontaminate import shape
from robot_models.dataset.drone_frames import AWAY
from robot_models.dataset.frames_lexicon import frames_lexicon as lexicon
from robot_models.language import load_language
from robot_models.skills import ROBOT_TYPES

_QUOTED = re.compile(r"'([^']*)'")
# Families whose quoted strings are object names taken from the instruction.
_COPYING = {"find_visible", "find_search", "check_either", "check_on", "find_under", "in_view"}
_COPYING |= {"report", "scan", "compound", "quick_stack", "pick_place", "handover", "check"}


@cache
def _sample(robot_type: str, split: str = "train") -> tuple[Example, ...]:
    rng = random.Random(11)
    return tuple(generate(robot_type, 3000, rng, generator="frames", split=split))  # type: ignore[arg-type]


@pytest.mark.parametrize("robot", ROBOT_TYPES)
@pytest.mark.parametrize("split", ["train", "heldout"])
def test_every_plan_is_a_valid_plan_of_its_robot(robot: str, split: str) -> None:
    language = load_language(robot)
    for example in _sample(robot, split):
        assert language.parse(example.plan), example


@pytest.mark.parametrize("robot", ROBOT_TYPES)
def test_object_names_are_copied_as_written(robot: str) -> None:
    copied = 0
    for example in _sample(robot):
        if example.family not in _COPYING:
            continue
        for name in _QUOTED.findall(example.plan):
            if name in ("fruit bin", "vegetable bin"):
                continue
            assert name in example.instruction, example
            copied += 1
    assert copied > 1000


def _heads(split: Literal["train", "heldout"]) -> set[str]:
    return set(lexicon(split).nouns())


@pytest.mark.parametrize("robot", ROBOT_TYPES)
def test_held_out_objects_are_never_in_training_plans(robot: str) -> None:
    heldout_heads = _heads("heldout")
    assert heldout_heads and not heldout_heads & _heads("train")
    nouns = heldout_heads | _heads("train")
    for example in _sample(robot):
        for name in _QUOTED.findall(example.plan):
            words = name.lower().split()
            # the head noun: the longest lexicon noun the name ends with ("small red" cup)
            tails = (" ".join(words[i:]) for i in range(len(words)))
            head = next((t for t in tails if t in nouns), None)
            assert head not in heldout_heads, example
    heldout_names = {n.lower() for e in _sample(robot, "heldout") for n in _QUOTED.findall(e.plan)}
    assert any(n.split()[-1] in heldout_heads for n in heldout_names if n)


def test_drone_hazards_move_away_from_the_danger_first() -> None:
    urgent = [e for e in _sample("drone") if e.family.startswith("urgent")]
    assert len(urgent) > 200
    first_calls = Counter(e.plan[:2] for e in urgent)
    assert set(first_calls) <= set(AWAY.values())
    assert len(first_calls) == len(set(AWAY.values()))  # every side is met


def test_arm_hazards_go_home_and_grasp_nothing() -> None:
    hazards = [e for e in _sample("arm") if e.family == "hazard"]
    assert hazards and all(e.plan == "hm();" for e in hazards)


@pytest.mark.parametrize("robot", ROBOT_TYPES)
def test_requests_outside_the_skills_are_refused_with_a_message(robot: str) -> None:
    refused = [e for e in _sample(robot) if e.family == "refusal"]
    assert len(refused) > 50
    assert all(re.fullmatch(r"lg\('cannot [^']+'\);", e.plan) for e in refused)


@pytest.mark.parametrize("robot", ROBOT_TYPES)
def test_many_more_shapes_of_asking_than_templates(robot: str) -> None:
    """Distinct instructions once object names and numbers are blanked."""

    def shapes(examples: tuple[Example, ...] | list[Example]) -> int:
        return len({shape(e.instruction, _QUOTED.findall(e.plan)) for e in examples})

    templates = generate(robot, 3000, random.Random(11), generator="templates")
    frames = _sample(robot)
    assert shapes(frames) > 4 * shapes(templates)
    assert shapes(frames) > 0.75 * len(frames)  # most requests are worded their own way


def test_the_frames_data_set_is_deterministic_and_keeps_lrtrace() -> None:
    small = build_dataset(per_type=300, generator="frames")
    assert small == build_dataset(per_type=300, generator="frames")
    assert len(small.lrtrace) == 11
    assert Counter(e.robot_type for e in small.train) == {"drone": 300, "arm": 300}
    train_keys = {(e.scene, e.instruction) for e in small.train}
    assert not train_keys & {(e.scene, e.instruction) for e in small.heldout}


def test_an_unknown_generator_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown data generator 'poems'"):
        build_dataset(generator="poems")  # type: ignore[arg-type]


def test_the_mixed_data_set_is_the_templates_split_plus_frames() -> None:
    templates = build_dataset(per_type=300)
    mixed = build_dataset(per_type=300, generator="mixed")
    assert mixed == build_dataset(per_type=300, generator="mixed")
    assert mixed.heldout == templates.heldout and mixed.lrtrace == templates.lrtrace
    assert mixed.train[: len(templates.train)] == templates.train
    frames = mixed.train[len(templates.train) :]
    assert Counter(e.robot_type for e in frames) == {"drone": 300, "arm": 300}
    keys = [(e.scene, e.instruction) for e in mixed.train]
    assert len(set(keys)) == len(keys)
    assert not set(keys) & {(e.scene, e.instruction) for e in mixed.heldout}
