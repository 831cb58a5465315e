"""The lexicon extractor's rules (`dataset/lexicon_extract.py`) on a small WordNet
written in WordNet's own database format, so the test needs no wordnet-base install."""

from __future__ import annotations

from pathlib import Path

import pytest

from robot_models.dataset.lexicon_categories import Category
from robot_models.dataset.lexicon_extract import extract, min_zipf, phrase
from robot_models.dataset.wordnet_nouns import WordNetNouns

# offset lexfile(06 artifact, 18 person) "n" word-count(hex) words.. pointers | gloss
DATA = """\
  1 licence header lines start with spaces
00000001 03 n 01 entity 0 000 | that which exists
00000002 06 n 01 container 0 001 @ 00000001 n 0000 | holds things
00000003 06 n 02 cup 0 teacup 0 001 @ 00000002 n 0000 | a small open container
00000004 06 n 01 structure 0 001 @ 00000001 n 0000 | a thing constructed
00000005 06 n 01 shed 0 001 @ 00000004 n 0000 | a small outbuilding
00000006 06 n 01 Ming_vase 0 001 @ 00000002 n 0000 | a named kind: capitalised
00000007 06 n 01 device 0 001 @ 00000001 n 0000 | an instrumentality
00000008 06 n 01 shed_latch 0 002 @ 00000007 n 0000 #p 00000005 n 0000 | part of a shed
00000009 06 n 01 tape_measure 0 001 @ 00000007 n 0000 | measuring tape
00000010 06 n 01 left 0 001 @ 00000002 n 0000 | a box called left
00000011 18 n 01 cup 0 001 @ 00000001 n 0000 | (slang) an insult for a person
00000012 06 n 01 tin_box 0 001 @ 00000002 n 0000 | a container of tin
00000013 06 n 01 very_rare_thing 0 001 @ 00000002 n 0000 | rare
00000014 06 n 01 bike 0 002 @ 00000004 n 0000 @ 00000007 n 0000 | a device under an excluded kind
00000015 06 n 01 jar 0 002 @ 00000002 n 0000 #p 00000005 n 0000 | a container, part of a shed
00000016 05 n 01 dog 0 001 @ 00000001 n 0000 | an animal
00000017 05 n 01 guide_dog 0 001 @ 00000016 n 0000 | a dog
00000018 05 n 01 large_white 0 001 @ 00000001 n 0000 | a butterfly
00000019 05 n 01 dogs 0 001 @ 00000001 n 0000 | a plural lemma
"""
# lemma pos synset_cnt p_cnt [ptr...] sense_cnt tagsense_cnt offsets (most frequent first)
INDEX = """\
  1 licence header
container n 1 1 @ 1 1 00000002
cup n 2 1 @ 2 1 00000003 00000011
teacup n 1 1 @ 1 0 00000003
shed n 1 1 @ 1 1 00000005
structure n 1 1 @ 1 1 00000004
device n 1 1 @ 1 1 00000007
entity n 1 0 1 1 00000001
ming_vase n 1 1 @ 1 0 00000006
shed_latch n 1 2 @ #p 1 0 00000008
tape_measure n 1 1 @ 1 0 00000009
left n 1 1 @ 1 1 00000010
tin_box n 1 1 @ 1 0 00000012
very_rare_thing n 1 1 @ 1 0 00000013
bike n 1 1 @ 1 0 00000014
jar n 1 2 @ #p 1 1 00000015
dog n 1 1 @ 1 1 00000016
guide_dog n 1 1 @ 1 0 00000017
large_white n 1 1 @ 1 0 00000018
dogs n 1 1 @ 1 0 00000019
"""
ZIPF = {"very rare thing": 4.0, "tin box": 3.0, "tape measure": 4.2}


@pytest.fixture(scope="module")
def wordnet(tmp_path_factory: pytest.TempPathFactory) -> WordNetNouns:
    directory: Path = tmp_path_factory.mktemp("wordnet")
    (directory / "data.noun").write_text(DATA, encoding="utf-8")
    (directory / "index.noun").write_text(INDEX, encoding="utf-8")
    (directory / "index.adj").write_text("red a 1 0 1 0 00000099\n", encoding="utf-8")
    return WordNetNouns.load(directory)


def zipf(word: str) -> float:
    return ZIPF.get(word, 5.0)


def test_the_database_format_is_read(wordnet: WordNetNouns) -> None:
    cup = wordnet.synset("cup.n.01")
    assert wordnet.synsets[cup].lemmas == ("cup", "teacup")
    assert wordnet.synsets[cup].lexfile == "noun.artifact"
    assert wordnet.ancestors(cup) == {cup, 2, 1}
    assert wordnet.synsets[8].part_of == (5,)
    assert wordnet.synset("cup.n.02") == 11 and wordnet.common_senses("cup") == (3,)
    assert wordnet.adjectives == {"red"}
    with pytest.raises(KeyError, match=r"cup\.n\.03"):
        wordnet.synset("cup.n.03")


def test_a_missing_wordnet_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="apt-get install -y wordnet-base"):
        WordNetNouns.load(tmp_path)


def test_phrases_are_lower_case_letters_of_at_most_forty_characters() -> None:
    assert phrase("tape_measure") == "tape measure"
    assert phrase("Ming_vase") is None
    assert phrase("r2d2") is None
    assert phrase("a" * 41) is None
    assert phrase("one_two_three_four") is None  # at most three words
    assert phrase("t-shirt") == "t-shirt"


def test_extract_follows_hypernyms_and_drops_what_it_should(wordnet: WordNetNouns) -> None:
    objects = Category(
        "objects.txt",
        ("noun.artifact",),
        ("container.n.01", "device.n.01"),
        ("structure.n.01",),
        parts_of=("structure.n.01",),
        parts_kept=("container.n.01",),
        keep=("bike.n.01",),
    )
    words = extract(wordnet, zipf, objects)
    # cup and teacup are containers; "cup"'s insulting person sense drops only "cup"
    assert "teacup" in words and "cup" not in words
    assert "container" in words and "tape measure" in words
    assert "shed" not in words  # excluded: a structure
    assert "shed latch" not in words  # only ever a part of a structure
    assert "jar" in words  # a part of a shed too, but a container in its own right
    assert "bike" in words  # kept despite the exclusion
    assert "left" not in words  # stop-list
    assert "ming vase" not in words  # a name
    assert "tin box" not in words  # 3.0 < 2.5 + 1 for the second word
    assert "very rare thing" not in words  # 4.0 < 2.5 + 2


def test_further_words_ask_more_frequency() -> None:
    category = Category("x.txt", ("noun.artifact",), ("container.n.01",), min_zipf=2.5)
    assert min_zipf(category, "cup") == 2.5
    assert min_zipf(category, "tape measure") == 3.5
    assert min_zipf(category, "t-shirt") == 3.5


def test_attributes_keep_words_with_other_insulting_senses(wordnet: WordNetNouns) -> None:
    people = Category("people.txt", ("noun.person",), ("entity.n.01",), top=2)
    assert "cup" not in extract(wordnet, zipf, people)
    kinds = Category("kinds.txt", ("noun.artifact",), ("container.n.01",), top=2, attribute=True)
    assert "cup" in extract(wordnet, zipf, kinds)
    assert "left" in extract(wordnet, zipf, kinds)  # no stop-list for attributes


def test_headed_phrases_and_no_plural_beside_its_singular(wordnet: WordNetNouns) -> None:
    animals = Category("animals.txt", ("noun.animal",), ("entity.n.01",), headed=True)
    assert extract(wordnet, zipf, animals) == {"dog", "guide dog"}
    loose = Category("animals.txt", ("noun.animal",), ("entity.n.01",))
    assert extract(wordnet, zipf, loose) == {"dog", "guide dog", "large white"}
