"""The open object vocabulary (`data/lexicon/`, `dataset/lexicon.py`)."""

from __future__ import annotations

import random
import re

import pytest

from robot_models.dataset.lexicon import (
    DESK_FILES,
    HELDOUT_PERCENT,
    LEXICON_DIR,
    Lexicon,
    lexicon,
    nonce_name,
    read_list,
    split_of,
)
from robot_models.dataset.lexicon_categories import CATEGORIES
from robot_models.dataset.lexicon_extract import (
    STOP_WORDS,
    contaminated,
    evaluation_text,
    plurals,
)
from robot_models.language import load_language
from robot_models.skills import MAX_STRING_ARG_CHARS

NOUN_FILES = (
    "objects.txt",
    "furniture.txt",
    "fruits.txt",
    "vegetables.txt",
    "animals.txt",
    "people.txt",
    *DESK_FILES.values(),
)
ALL_FILES = tuple(c.file for c in CATEGORIES)
ATTRIBUTE_FILES = tuple(c.file for c in CATEGORIES if c.attribute)
# (lowest, highest) entries per list: the extractor's aims, with room for a re-run
BOUNDS = {
    "objects.txt": (2000, 6000),
    "furniture.txt": (150, 600),
    "fruits.txt": (50, 200),
    "vegetables.txt": (50, 200),
    "animals.txt": (50, 250),
    "people.txt": (100, 600),
    "tableware.txt": (30, 300),
    "writing.txt": (10, 200),
    "waste.txt": (30, 300),
    "reading.txt": (30, 300),
    "colours.txt": (30, 200),
    "materials.txt": (15, 200),
}
ENTRY = re.compile(r"[a-z]+(?:[ -][a-z]+)*")


def test_every_list_is_committed_sorted_with_a_header() -> None:
    assert set(ALL_FILES) == set(BOUNDS)
    for name in ALL_FILES:
        lines = (LEXICON_DIR / name).read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith(
            f"# {name}: made by python -m robot_models.dataset.lexicon_extract"
        )
        assert "only removes words" in lines[0]
        entries = lines[1:]
        assert entries == sorted(set(entries)), f"{name} is not sorted and unique"


@pytest.mark.parametrize("name", ALL_FILES)
def test_list_sizes_are_sensible(name: str) -> None:
    low, high = BOUNDS[name]
    assert low <= len(read_list(name)) <= high


@pytest.mark.parametrize("name", ALL_FILES)
def test_entries_are_lower_case_printable_and_short(name: str) -> None:
    for entry in read_list(name):
        assert ENTRY.fullmatch(entry), f"{name}: {entry!r}"
        assert len(entry) <= 40


def test_no_stop_word_in_a_noun_list() -> None:
    for name in NOUN_FILES:
        assert not STOP_WORDS & set(read_list(name)), name


def test_the_evaluation_sets_objects_are_in_no_list() -> None:
    annotated, instructions = evaluation_text()
    assert annotated and instructions
    for name in ALL_FILES:
        entries = read_list(name)
        assert not annotated & set(entries), name
        if name not in ATTRIBUTE_FILES:  # attributes lose annotated object strings only
            assert not contaminated(entries, annotated, instructions), name


def test_decontamination_finds_words_and_plurals_whole() -> None:
    said = ["count the boxes on the shelf", "a pair of reading glasses, please"]
    assert contaminated(
        ["box", "shelf", "ox", "reading glasses", "glass", "pair"], set(), said
    ) == {
        "box",
        "shelf",
        "reading glasses",
        "glass",
        "pair",
    }
    assert contaminated(["thermostat"], {"thermostat"}, []) == {"thermostat"}
    assert "knives" in plurals("knife") and "berries" in plurals("berry")


def test_train_and_heldout_are_disjoint_and_about_ninety_ten() -> None:
    train, heldout = lexicon("train"), lexicon("heldout")
    assert not train.nouns() & heldout.nouns()
    everything = {w for name in NOUN_FILES for w in read_list(name)}
    assert train.nouns() | heldout.nouns() == everything
    share = 100 * len(heldout.nouns()) / len(everything)
    assert HELDOUT_PERCENT - 2 <= share <= HELDOUT_PERCENT + 2
    for place in DESK_FILES:
        assert train.desk[place] and heldout.desk[place]
    assert train.colours == heldout.colours and train.sizes == heldout.sizes


def test_the_split_is_by_entry_and_stable() -> None:
    assert split_of("tape measure") == split_of("tape measure")
    counts = {"train": 0, "heldout": 0}
    for i in range(10000):
        counts[split_of(f"word{i}")] += 1
    assert 900 <= counts["heldout"] <= 1100


def test_lexicon_is_cached_and_rejects_unknown_splits() -> None:
    assert lexicon("train") is lexicon("train")
    assert isinstance(lexicon("heldout"), Lexicon)
    with pytest.raises(ValueError, match="unknown lexicon split 'test'"):
        lexicon("test")


def test_attribute_lists_hold_the_common_words() -> None:
    vocab = lexicon("train")
    assert {"plastic", "metal", "leather", "wood"} <= set(vocab.materials)
    assert {"blue", "green", "purple"} <= set(vocab.colours)
    assert "broken" in vocab.states and "small" in vocab.sizes


def test_nonce_names_are_made_up_and_deterministic() -> None:
    known = lexicon("train").nouns() | lexicon("heldout").nouns()
    names = [nonce_name(random.Random(7)) for _ in range(3)]
    assert len(set(names)) == 1
    rng = random.Random(11)
    made = [nonce_name(rng) for _ in range(500)]
    assert len(set(made)) > 400
    for name in made:
        assert name not in known
        assert re.fullmatch(r"[a-z]{4,20}", name), name
        assert re.search(r"[aeiouy]", name)


def test_the_plan_language_accepts_every_entry_as_an_argument() -> None:
    assert MAX_STRING_ARG_CHARS >= 40
    language = load_language("drone")
    for name in ALL_FILES:
        for entry in read_list(name):
            assert language.parse(f"o('{entry}');"), entry
