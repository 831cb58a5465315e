"""The word-class extractor (`dataset/word_classes_extract.py`) on a small WordNet
written in WordNet's own index and exception formats (no wordnet-base install)."""

from __future__ import annotations

from pathlib import Path

import pytest

from robot_models.dataset.word_classes_extract import (
    adjective_forms,
    extract,
    is_noun,
    verb_forms,
    write,
)
from robot_models.grounding import read_sections

INDEX = {
    "noun": ["key", "walk", "box", "watch", "go"],
    "verb": ["walk", "bring", "unplug", "carry", "watch", "go", "fall", "break"],
    "adj": ["tiny", "late", "red_hot"],
    "adv": ["slowly", "tiny_bit"],
}
EXCEPTIONS = {
    "noun": "mice mouse\n",
    "verb": "fell fall\nbroken break\nwent go\n",
    "adj": "tinier tiny\n",
    "adv": "",
}


@pytest.fixture(scope="module")
def wordnet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory: Path = tmp_path_factory.mktemp("wordnet")
    for pos, lemmas in INDEX.items():
        lines = ["  1 licence header"] + [f"{lemma} {pos[0]} 1 0 1 0 00000001" for lemma in lemmas]
        (directory / f"index.{pos}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (directory / f"{pos}.exc").write_text(EXCEPTIONS[pos], encoding="utf-8")
    return directory


def test_inflections() -> None:
    assert verb_forms("carry") == ({"carry", "carries"}, {"carried", "carrying"})
    finite, participles = verb_forms("unplug")
    assert finite == {"unplug", "unplugs"} and {"unplugged", "unplugging"} <= participles
    assert verb_forms("watch")[0] == {"watch", "watches"}
    assert adjective_forms("late") == {"late", "later", "latest"}
    assert {"tinier", "tiniest"} <= adjective_forms("tiny")


def test_nouns_by_wordnet_morphology() -> None:
    nouns = {"key", "box", "mouse", "man"}
    exceptions = {"mice": {"mouse"}}
    for form in ("keys", "boxes", "mice", "men", "key"):
        assert is_noun(form, nouns, exceptions), form
    assert not is_noun("keyed", nouns, exceptions)


def test_forms_that_can_be_nouns_are_never_listed(wordnet: Path) -> None:
    classes = dict(extract(wordnet, lambda word: 5.0, 2.5))
    assert classes["bring"] == classes["brings"] == classes["slowly"] == "other"
    assert classes["fell"] == classes["went"] == "other"  # past only
    assert classes["walked"] == classes["unplugged"] == classes["broken"] == "modifier"
    assert classes["tiny"] == classes["tinier"] == classes["late"] == "modifier"
    # nouns, whatever else they are: walk(s), watch(es), go, keys
    assert not {"walk", "walks", "watch", "watches", "go", "keys"} & set(classes)
    assert "red_hot" not in classes and "tiny_bit" not in classes  # multi-word lemmas


def test_rare_forms_are_left_to_be_names(wordnet: Path) -> None:
    classes = dict(extract(wordnet, lambda word: 2.0 if word == "unplugged" else 5.0, 2.5))
    assert "unplugged" not in classes and classes["unplug"] == "other"


def test_the_list_reads_back_in_sections(wordnet: Path, tmp_path: Path) -> None:
    entries = extract(wordnet, lambda word: 5.0, 2.5)
    out = tmp_path / "classes.txt"
    write(out, entries, "a header\n\nof two lines")
    assert out.read_text().startswith("# a header\n#\n# of two lines\n[modifier]\n")
    sections = read_sections(out)
    assert sections == {
        kind: frozenset(form for form, k in entries if k == kind) for kind in ("modifier", "other")
    }


def test_without_wordnet_the_error_names_the_package(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        extract(tmp_path, lambda word: 5.0, 2.5)
