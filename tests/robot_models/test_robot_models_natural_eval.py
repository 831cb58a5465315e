"""The natural evaluation set: at least 150 annotated instructions per robot type,
every annotation valid for its robot's skills (names, numbers in range after unit
conversion), no duplicates, the kinds of phrasing the issue asks for present, and
nothing the data generator writes: no instruction it produced or a template could
have produced (numbers and vocabulary aside), none of the prompt's examples, and
none of `ordinary_instructions.yaml` (a separate set with its own recorded figures)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from robot_models.dataset import build_dataset, generate
from robot_models.dataset import vocabulary as vocab
from robot_models.dataset.build import GENERATORS
from robot_models.natural_eval import MIN_PER_TYPE, NaturalEntry, alternatives, natural_eval
from robot_models.ordinary_instructions import ordinary_instructions
from robot_models.prompts import _EXAMPLES
from robot_models.skills import ROBOT_TYPES

_QUOTED = re.compile(r"'([^'\n]*)'")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@cache
def _generated() -> dict[str, list[tuple[str, str]]]:
    """(instruction, plan) per robot type: the data set and a second large sample."""
    out: dict[str, list[tuple[str, str]]] = {r: [] for r in ROBOT_TYPES}
    for generator in GENERATORS:
        data = build_dataset(generator=generator)
        for e in (*data.train, *data.heldout, *data.lrtrace):
            out[e.robot_type].append((e.instruction, e.plan))
        rng = random.Random(7)
        for robot in ROBOT_TYPES:
            sample = generate(robot, 4000, rng, generator=generator)
            out[robot] += [(e.instruction, e.plan) for e in sample]
    return out


@cache
def _trained_objects() -> frozenset[str]:
    """Every string the generator puts in a plan, and every word list it draws from."""
    names: set[str] = set()
    for pairs in _generated().values():
        for _, plan in pairs:
            names.update(n.lower() for n in _QUOTED.findall(plan))
    for name, value in vars(vocab).items():
        if name.isupper():  # the word lists
            names.update(_strings(value))
    return frozenset(names)


def _strings(value: object) -> set[str]:
    if isinstance(value, str):
        return {value.lower()}
    if isinstance(value, dict):
        return _strings(tuple(value)) | _strings(tuple(value.values()))
    if isinstance(value, tuple):
        return {s for item in value for s in _strings(item)}
    return set()


def _blank(words: object) -> re.Pattern[str]:
    """Any of `words` as a whole word, longest first ("teddy bear" before "teddy").
    The words as a trie: a flat alternation of the lexicon's thousands of words is
    tried word by word at every position, which made this test slow."""
    trie: dict[str, Any] = {}
    for word in set(words):  # type: ignore[call-overload]
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here
    return re.compile(r"\b(?:" + _trie_pattern(trie) + r")\b")


def _trie_pattern(node: dict[str, Any]) -> str:
    """The pattern of a trie node: each branch, the words that end here optional
    after them (greedy, so a longer word is tried before a shorter)."""
    branches = [re.escape(char) + _trie_pattern(child) for char, child in node.items() if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in node else body


def _shape(text: str, *blanks: re.Pattern[str]) -> str:
    """The instruction with numbers and the blanked words (objects) replaced."""
    shaped = _NUMBER.sub("<n>", text.lower().strip())
    for blank in blanks:
        shaped = blank.sub("<w>", shaped)
    return shaped


@pytest.mark.parametrize("robot", ROBOT_TYPES)
def test_at_least_150_valid_entries_per_robot_type(robot: str) -> None:
    entries = natural_eval(robot)  # validated against the robot's skill set
    assert len(entries) >= MIN_PER_TYPE
    keys = [e.instruction.strip().lower() for e in entries]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("robot", ROBOT_TYPES)
def test_no_instruction_comes_from_the_generator_or_the_prompt(robot: str) -> None:
    generated = _generated()[robot]
    instructions = {i.strip().lower() for i, _ in generated}
    trained = _blank(_trained_objects())
    shapes = {_shape(i, trained) for i, _ in generated}
    prompt = {i.lower() for robots in _EXAMPLES.values() for _, i, _ in robots}
    ordinary = {o.instruction.lower() for o in ordinary_instructions(robot)}
    for entry in natural_eval(robot):
        said = entry.instruction.strip().lower()
        assert said not in instructions, entry.instruction
        assert said not in prompt, entry.instruction
        assert said not in ordinary, entry.instruction  # bench/grammar.py's own set
        # a template's phrasing with other objects in it is a template's too
        named = _blank(n.lower() for c in entry.objects for n in alternatives(c))
        blanks = (named, trained) if entry.objects else (trained,)
        assert _shape(said, *blanks) not in shapes, entry.instruction


@pytest.mark.parametrize("robot", ROBOT_TYPES)
def test_the_set_has_the_phrasings_the_issue_asks_for(robot: str) -> None:
    entries = natural_eval(robot)
    known = _trained_objects()

    def novel(e: NaturalEntry) -> bool:
        return any(
            all(name.lower() not in known for name in alternatives(choice)) for choice in e.objects
        )

    def count(test: Callable[[NaturalEntry], object]) -> int:
        return sum(1 for e in entries if test(e))

    assert count(novel) >= len(entries) // 3  # objects the training data never names
    assert count(lambda e: any(" " in n for c in e.objects for n in alternatives(c))) >= 30
    assert count(lambda e: "?" in e.instruction) >= 15  # questions
    assert count(lambda e: e.instruction == e.instruction.lower()) >= len(entries) // 2
    assert count(lambda e: e.scene == "") >= 10  # empty scenes
    assert count(lambda e: e.outside is not None) >= 15  # outside the robot's skills
    assert count(lambda e: e.numbers) >= 10  # stated distances, angles, positions
    assert count(lambda e: e.forbid) >= 10  # hazards: what a plan must not do
    assert count(lambda e: len(e.skills) >= 3) >= 8  # several steps in one sentence


def _write(tmp_path: Path, entry: str) -> Path:
    path = tmp_path / "natural.yaml"
    path.write_text(f"drone:\n  - {{scene: '', instruction: 'go up a meter'}}\n  - {entry}\n")
    return path


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "{scene: '', instruction: 'x', skills: [pk]}",
            r"entry 1 \('x'\): skills: 'pk' is no skill",
        ),
        (
            "{scene: '', instruction: 'x', forbid: ['mf|']}",
            r"entry 1 \('x'\): forbid.*empty alternative",
        ),
        ("{scene: '', instruction: 'x', first: 'zz'}", "first: 'zz' is no skill of the drone"),
        (
            "{scene: '', instruction: 'x', numbers: [{skill: mu, value: 600}]}",
            r"numbers\[0\]: 600 is outside mu's distance \(int in \[20, 500\] cm\)",
        ),
        (
            "{scene: '', instruction: 'x', numbers: [{skill: 'tc|tu', value: 0}]}",
            r"numbers\[0\]: 0 is outside tc's angle",
        ),
        (
            "{scene: '', instruction: 'x', numbers: [{skill: mu, arg: z, value: 50}]}",
            "mu has no numeric argument 'z'",
        ),
        ("{scene: '', instruction: 'x', numbers: [{skill: tk, value: 1}]}", "tk has no numeric"),
        ("{scene: '', instruction: 'x', objects: [\"cat's toy\"]}", "cannot be a string argument"),
        ("{scene: '', instruction: ''}", "entry 1: instruction: String should have at least"),
        ("{instruction: 'x'}", "entry 1 \\('x'\\): scene: Field required"),
        ("{scene: '', instruction: 'x', colour: red}", "colour: Extra inputs"),
        ("{scene: '', instruction: 'Go up a meter '}", "the same instruction as entry 0"),
    ],
)
def test_a_bad_entry_is_refused_naming_entry_and_field(
    tmp_path: Path, entry: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        natural_eval("drone", _write(tmp_path, entry))


def test_an_unknown_robot_type_or_a_missing_list_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown robot type 'boat'"):
        natural_eval("boat")
    with pytest.raises(ValueError, match="no list of entries under 'arm'"):
        natural_eval("arm", _write(tmp_path, "{scene: '', instruction: 'x'}"))
