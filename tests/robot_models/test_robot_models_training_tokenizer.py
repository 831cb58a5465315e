"""The planner tokenizer's number formats: place-marked digits (the default), plain
digits, and one token per whole number; in every format digits never merge with
other text, and decoding gives back the exact text."""

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from robot_models.training.tokenizer import (
    HUNDREDS_MARK,
    NUMBER_TOKENS,
    TENS_MARK,
    save_tokenizer,
    train_tokenizer,
)

CORPUS = [
    "Go left 66 cm, then turn left by 135 degrees",
    "ml(66);tu(135);",
    "Move the gripper to x 400, y -200, z 50",
    "mt(400,-200,50);og();",
    "Hover for 1.5 seconds, rotate 9 degrees, fly 270 cm",
    "dl(1.5);tc(9);mf(270);",
] * 20
TEXTS = [
    "mt(400,-200,50);og();",
    "Go right 74 cm and fly up 300 cm",
    "dl(1.5);tc(9);mb(436);",
    "1234 05 007 x0y12z345",
    "no numbers at all: ?iv('cat')==True{tp();}",
    "",
]


def _tokens(tokenizer: Tokenizer, text: str) -> list[str]:
    return list(tokenizer.encode(text).tokens)


@pytest.fixture(scope="module")
def place() -> Tokenizer:
    return train_tokenizer(CORPUS, vocab_size=300)


def test_place_format_marks_every_digit_with_its_place(place: Tokenizer) -> None:
    def strip(token: str) -> str:  # byte-level shows the marks as these characters
        return token.replace("ĝ", "H").replace("Ĝ", "T")

    assert [strip(t) for t in _tokens(place, "436")] == ["H4", "T3", "6"]
    assert [strip(t) for t in _tokens(place, "ml(59);")][-3:-1] == ["T5", "9"]
    assert [strip(t) for t in _tokens(place, "599")][:2] == ["H5", "T9"]
    # a tens 5 and a hundreds 5 are different tokens, a units 5 a third one
    ids = {place.encode(n).ids[0] for n in ("500", "50", "5")}
    assert len(ids) == 3


def test_place_format_one_token_per_digit_and_exact_round_trip(place: Tokenizer) -> None:
    rng = random.Random(0)
    for number in [*range(0, 1000, 7), *(rng.randint(0, 999) for _ in range(200))]:
        ids = place.encode(f"mf({number});").ids
        assert place.decode(ids) == f"mf({number});"
        assert len(place.encode(str(number)).ids) == len(str(number))
    for text in TEXTS:
        assert place.decode(place.encode(text).ids) == text


def test_place_format_never_merges_digits_with_other_text(place: Tokenizer) -> None:
    for token in place.get_vocab():
        if any(c.isdigit() for c in token):
            assert len(token) <= 2 and token[-1].isdigit(), token


def test_marks_are_not_printable_text() -> None:
    # control characters: never typed in an instruction (the service rejects them)
    assert not HUNDREDS_MARK.isprintable() and not TENS_MARK.isprintable()


def test_place_tokenizer_file_decodes_the_same_in_transformers(
    place: Tokenizer, tmp_path: Path
) -> None:
    from transformers import PreTrainedTokenizerFast

    save_tokenizer(place, tmp_path)
    hf = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    for text in TEXTS:
        ids = place.encode(text).ids
        assert hf.encode(text, add_special_tokens=False) == ids
        assert hf.decode(ids) == text


def test_every_number_below_1000_is_one_token_and_decodes_back() -> None:
    tokenizer = train_tokenizer(CORPUS, vocab_size=300, numbers="whole")
    for number in range(NUMBER_TOKENS):
        ids = tokenizer.encode(str(number)).ids
        assert len(ids) == 1, number
        assert tokenizer.decode(ids) == str(number)
    assert tokenizer.decode(tokenizer.encode("mt(400,-200,50);").ids) == "mt(400,-200,50);"


def test_longer_digit_runs_split_leftmost_and_leading_zeros_stay_digits() -> None:
    tokenizer = train_tokenizer(CORPUS, vocab_size=300, numbers="whole")
    assert _tokens(tokenizer, "1234") == ["123", "4"]
    assert _tokens(tokenizer, "05") == ["0", "5"]
    assert "66" in _tokens(tokenizer, "ml(66);")
    assert _tokens(tokenizer, "-200")[-1] == "200"


def test_no_bpe_token_mixes_digits_with_other_characters() -> None:
    tokenizer = train_tokenizer(CORPUS, vocab_size=300, numbers="whole")
    for token in tokenizer.get_vocab():
        if any(c.isdigit() for c in token):
            assert token.isdigit(), token


def test_digits_format_splits_digits_into_single_tokens() -> None:
    tokenizer = train_tokenizer(CORPUS, vocab_size=300, numbers="digits")
    assert _tokens(tokenizer, "400") == ["4", "0", "0"]


def test_unknown_number_format_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown number format .roman..*place, digits, whole"):
        train_tokenizer(CORPUS, vocab_size=300, numbers="roman")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789 .,-();{}'abcXYZ\nΩ", max_size=40))
def test_place_format_encodes_any_text_and_decodes_it_back(place: Tokenizer, text: str) -> None:
    # a text may start or end with a number of any length (a zero-width mark at the
    # start of the text once made tokenizers panic)
    assert place.decode(place.encode(text).ids) == text
