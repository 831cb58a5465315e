"""The planner tokenizer's number formats: place-marked digits (the default), plain
digits, and one token per whole number; in every format digits never merge with
other text, and decoding gives back the exact text. Its word formats: `spaced`
makes an object name the same ids in the instruction and in a quoted plan string
(the `attached` format does not), keeps the place-marked digits, and loads the same
in transformers."""

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from robot_models.dataset import DatasetSplit
from robot_models.prompts import format_request, prompt_prefix
from robot_models.training.loop import TrainConfig, training_data, training_tokenizer
from robot_models.training.tokenizer import (
    HUNDREDS_MARK,
    NUMBER_TOKENS,
    TENS_MARK,
    VOCAB_SIZE,
    min_token_count,
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


# Object names a request can carry: multi-word, hyphenated, capitalised, possessive,
# with digits or non-ASCII letters, and words no training text has.
NAMES = [
    "red cup",
    "cup",
    "florbin",
    "blue florbin jar",
    "Zorgle-Wump",
    "ice-cream maker",
    "T-shirt",
    "Red Cup",
    "GLOWING ORB",
    "dog's bowl",
    "grandma's old teapot",
    "R2 unit",
    "box 42",
    "café mug",
    "Übergrößen-Kiste",
    "quaddle snorp vexillum",
    "sofa",
    "tray",
]
ODD_TEXTS = [
    "it's the dog's bowl, isn't it?",
    "Fnid teh rde cpu PLEASE!!",
    "  two  spaces,\ttabs\t\tand\n\nnewlines \n  indented",
    "go 1.5 m up, then 436 cm left; 05 007 1234",
    "ñandú 🐱 日本語 — über-schnell, ¿sí?",
    "'sofa' or \"lamp\" (the 'tea' one)",
    "?sw('Zorgle-Wump')==True{o('Zorgle-Wump');a('Zorgle-Wump');tp();}",
    " leading and trailing ",
    "",
]


@pytest.fixture(scope="module")
def data() -> DatasetSplit:
    return training_data(TrainConfig())


@pytest.fixture(scope="module")
def spaced(data: DatasetSplit) -> Tokenizer:
    return training_tokenizer(data, "place", "spaced")


@pytest.fixture(scope="module")
def attached(data: DatasetSplit) -> Tokenizer:
    return training_tokenizer(data, "place", "attached")


def _span_ids(tokenizer: Tokenizer, text: str, start: int, end: int) -> list[int] | None:
    """The ids of `text[start:end]` inside the encoding of `text`, or None when a
    token straddles the span's start or end (the span is then no run of tokens)."""
    encoding = tokenizer.encode(text, add_special_tokens=False)
    ids = []
    for token_id, (left, right) in zip(encoding.ids, encoding.offsets, strict=True):
        if left < end and right > start:  # the token overlaps the span
            if left < start or right > end:
                return None
            ids.append(token_id)
    return ids


def _name_ids(tokenizer: Tokenizer, text: str, name: str) -> list[int] | None:
    start = text.index(name)
    return _span_ids(tokenizer, text, start, start + len(name))


def _copies(tokenizer: Tokenizer, name: str) -> list[list[int] | None]:
    """The name's ids in the task, in the scene and in the plan."""
    request = format_request(f"visible: {name}, door", f"find the {name} please")
    task = request[request.index("Task:") :]
    plan = f"?sw('{name}')==True{{tp();}}"
    return [
        _name_ids(tokenizer, task, name),
        _name_ids(tokenizer, request, name),
        _name_ids(tokenizer, plan, name),
    ]


@pytest.mark.parametrize("name", NAMES)
def test_spaced_words_make_a_name_the_same_ids_in_the_request_and_the_plan(
    spaced: Tokenizer, name: str
) -> None:
    in_task, in_scene, in_plan = _copies(spaced, name)
    assert in_task is not None and in_task == in_scene == in_plan
    assert in_task == spaced.encode(name).ids  # and the same as the name alone


def test_attached_words_make_a_name_other_ids_in_the_plan(attached: Tokenizer) -> None:
    # the reason for the spaced format: `Ġred Ġcup` in the request, `red Ġcup` in a
    # plan (a name keeps its ids only where BPE learned no `Ġ` merge for its start)
    differ = [name for name in NAMES if len(set(map(str, _copies(attached, name)))) > 1]
    assert {"red cup", "cup", "florbin", "Red Cup", "café mug", "sofa"} <= set(differ)
    assert len(differ) >= 0.75 * len(NAMES), differ


def test_a_quoted_name_in_the_request_is_the_same_ids_as_in_the_plan(spaced: Tokenizer) -> None:
    # a quote opening a word is no contraction: `'sofa'` is `' sofa '`, not `'s ofa '`
    for name in ("sofa", "tray", "dog's bowl", "ll cool box"):
        text = f"find the '{name}' please"
        assert _name_ids(spaced, text, name) == _copies(spaced, name)[2], name


def test_spaced_words_never_hold_a_space_and_contractions_follow_letters(
    spaced: Tokenizer,
) -> None:
    space = "Ġ"  # the byte-level character for " "
    assert space in spaced.get_vocab()
    for token in spaced.get_vocab():
        assert space not in token or token == space, token
    pieces = spaced.pre_tokenizer.pre_tokenize_str("it's  the dog's\n\nbowl")
    assert [p for p, _ in pieces] == ["it", "'s", "Ġ", "Ġ", "the", "Ġ", "dog", "'s", "ĊĊ", "bowl"]


def test_spaced_words_keep_the_place_marked_digits(spaced: Tokenizer, attached: Tokenizer) -> None:
    # the same digit tokens as the attached format (their ids differ between two BPE runs)
    def strip(token: str) -> str:
        return token.replace("ĝ", "H").replace("Ĝ", "T")

    assert [strip(t) for t in _tokens(spaced, "436")] == ["H4", "T3", "6"]
    for text in ("ml(59);", "mt(400,-200,50);", "dl(2.5);tc(9);mb(436);", "x0y12z345 1234"):
        digits = [t for t in _tokens(spaced, text) if any(c.isdigit() for c in t)]
        assert digits == [t for t in _tokens(attached, text) if any(c.isdigit() for c in t)]
        assert all(len(token) <= 2 and token[-1].isdigit() for token in digits), digits
    for number in range(1000):
        assert len(spaced.encode(str(number)).ids) == len(str(number))


@pytest.mark.parametrize("words", ["spaced", "attached"])
@pytest.mark.parametrize("numbers", ["place", "digits", "whole"])
def test_every_format_round_trips_prompts_plans_and_odd_text(
    data: DatasetSplit, numbers: str, words: str
) -> None:
    tokenizer = train_tokenizer(
        [*CORPUS, *(e.instruction for e in data.train[:300])], 400, numbers, words
    )
    texts = [
        *TEXTS,
        *ODD_TEXTS,
        *(prompt_prefix(r) for r in ("drone", "arm")),
        *(format_request(e.scene, e.instruction) + e.plan for e in data.heldout[:50]),
        *(f"find the {name} please ?sw('{name}')==True{{tp();}}" for name in NAMES),
    ]
    for text in texts:
        assert tokenizer.decode(tokenizer.encode(text).ids) == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789 .,-();{}'abcXYZ\n\tΩé🐱", max_size=40))
def test_spaced_format_encodes_any_text_and_decodes_it_back(spaced: Tokenizer, text: str) -> None:
    assert spaced.decode(spaced.encode(text).ids) == text


def test_spaced_tokenizer_files_load_the_same_in_transformers(
    spaced: Tokenizer, data: DatasetSplit, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    save_tokenizer(spaced, tmp_path)
    texts = [
        *TEXTS,
        *ODD_TEXTS,
        prompt_prefix("drone"),
        *(format_request(e.scene, e.instruction) + e.plan for e in data.heldout[:20]),
    ]
    for hf in (
        AutoTokenizer.from_pretrained(str(tmp_path)),
        PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json")),
    ):
        for text in texts:
            ids = spaced.encode(text).ids
            assert hf.encode(text, add_special_tokens=False) == ids
            assert hf.decode(ids) == text


def test_the_vocabulary_size_and_word_format_are_training_options(data: DatasetSplit) -> None:
    assert TrainConfig().vocab_size == VOCAB_SIZE and TrainConfig().words == "attached"
    small = training_tokenizer(data, "place", "spaced", vocab_size=700)
    assert small.get_vocab_size() == 700
    with pytest.raises(ValueError, match=r"unknown word format .glued..*attached, spaced"):
        TrainConfig(words="glued")
    with pytest.raises(ValueError, match=r"vocab_size: must be at least 258, got 200"):
        TrainConfig(vocab_size=200)
    with pytest.raises(ValueError, match="unknown word format"):
        train_tokenizer(CORPUS, 300, words="glued")


@pytest.mark.parametrize("numbers", ["place", "digits", "whole"])
@pytest.mark.parametrize("words", ["attached", "spaced"])
def test_min_token_count_bounds_every_tokenizer_of_its_formats(numbers: str, words: str) -> None:
    """The bound by which `train` refuses too few positions before building data holds
    for a tokenizer that merged as far as it could (the prompts seen many times)."""
    prefixes = [prompt_prefix(t) for t in ("drone", "arm")]
    texts = [*prefixes, *TEXTS, *ODD_TEXTS]
    merged = train_tokenizer(texts * 4, 6000, numbers, words)
    for text in texts:
        bound = min_token_count(text, numbers, words)
        assert bound <= len(merged.encode(text).ids), text[:40]
    # close to the real count: most words of the prompt become one token
    assert min_token_count(prefixes[0], numbers, words) > 0.9 * len(merged.encode(prefixes[0]).ids)


def test_min_token_count_bounds_the_shipped_tokenizer() -> None:
    from robot_models.checkpoints import default_planner_path

    shipped = Tokenizer.from_file(str(default_planner_path() / "tokenizer.json"))
    for robot_type in ("drone", "arm"):
        prefix = prompt_prefix(robot_type)
        assert min_token_count(prefix) <= len(shipped.encode(prefix).ids)
