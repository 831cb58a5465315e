"""The copy bias's rule (engine/copy_bias.py) on a small vocabulary: which ids go on
spelling a listed name, only inside a quoted name (with openers, only one opened
right after an opener), up to and including the closing quote; and its parameters
refused by name."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from timely_core.engine.copy_bias import CopyBias, check_copy_params, copies
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.grammar_vocab import TokenBytes

SPELLED = [
    b"<eos>",  # 0, special
    b"o",  # 1
    b"('",  # 2
    b"cup",  # 3
    b"c",  # 4
    b"up",  # 5
    b"');",  # 6
    b"'",  # 7
    b" b",  # 8
    b"oard",  # 9
    b"fork",  # 10
    b"tp();",  # 11
    b"cu",  # 12
    b"lg",  # 13
    b"ta",  # 14
    b"(",  # 15
]
ID = {spelled: token_id for token_id, spelled in enumerate(SPELLED)}
BIAS = CopyBias(TokenBytes(tokens=SPELLED, special=frozenset({0})))
PARAMS = SamplingParams(copy_names=("cup", "cup board"), copy_bias=5.0)


def ids(*spelled: bytes) -> list[int]:
    return [ID[s] for s in spelled]


def test_outside_a_name_nothing_is_boosted() -> None:
    assert BIAS.boosted([], PARAMS) == []
    assert BIAS.boosted(ids(b"o"), PARAMS) == []
    # a name opened and closed: outside again
    assert BIAS.boosted(ids(b"o", b"('", b"fork", b"');"), PARAMS) == []


def test_an_opened_name_boosts_every_token_that_starts_a_listed_name() -> None:
    boosted = BIAS.boosted(ids(b"o", b"('"), PARAMS)
    assert boosted == sorted(ids(b"c", b"cu", b"cup"))


def test_inside_a_name_the_tokens_that_go_on_spelling_it_are_boosted() -> None:
    after_c = BIAS.boosted(ids(b"o", b"('", b"c"), PARAMS)
    assert after_c == sorted(ids(b"up"))  # "cup" and "cup board" both go on with "up"
    after_cup = BIAS.boosted(ids(b"o", b"('", b"cup"), PARAMS)
    # "cup" ends here (its quote, alone or in a longer token), "cup board" goes on
    assert after_cup == sorted(ids(b"'", b"');", b" b"))
    after_board = BIAS.boosted(ids(b"o", b"('", b"cup", b" b", b"oard"), PARAMS)
    assert after_board == sorted(ids(b"'", b"');"))


def test_with_openers_only_a_quote_right_after_one_opens_a_name() -> None:
    named = dataclasses.replace(PARAMS, copy_openers=("o(",))
    assert BIAS.boosted(ids(b"o", b"('"), named) == sorted(ids(b"c", b"cu", b"cup"))
    assert BIAS.boosted(ids(b"o", b"(", b"'", b"c"), named) == ids(b"up")  # split tokens
    assert BIAS.boosted(ids(b"lg", b"('"), named) == []  # a message, not a name
    assert BIAS.boosted(ids(b"ta", b"o", b"('"), named) == []  # `tao(` is another call
    assert BIAS.boosted(ids(b"lg", b"('"), PARAMS) == sorted(ids(b"c", b"cu", b"cup"))


def test_counting_as_ids_come_gives_what_a_full_count_gives() -> None:
    named = dataclasses.replace(PARAMS, copy_openers=("o(",))
    plan = ids(b"o", b"('", b"cup", b"');", b"lg", b"('", b"c", b"');", b"o", b"(", b"'", b"c")
    prompt = ids(b"'", b"fork")  # a quote in the prompt is not the plan's
    tokens = list(prompt)
    scan = None
    for token in plan:
        tokens.append(token)
        got, scan = BIAS.boosted_scan(tokens, len(prompt), named, scan)
        assert got == BIAS.boosted(tokens[len(prompt) :], named), tokens
        assert scan.scanned == len(tokens)
    assert got == ids(b"up")
    # a rewrite makes a new list: the count starts again
    rewritten = [*prompt, *ids(b"o", b"('", b"cup", b"');")]
    got, fresh = BIAS.boosted_scan(rewritten, len(prompt), named, scan)
    assert got == [] and fresh is not scan and fresh.parity == 0


def test_what_is_kept_between_steps_is_each_requests_own() -> None:
    """The ids kept for a name spelled so far belong to the names they were worked
    out for: another request's names, at the same point, get their own."""
    bias = CopyBias(TokenBytes(tokens=SPELLED, special=frozenset({0})))
    opened = ids(b"o", b"('", b"c")
    cup = bias.boosted(opened, PARAMS)
    assert cup == ids(b"up")
    other = dataclasses.replace(PARAMS, copy_names=("cu",))
    assert bias.boosted(opened, other) == []  # no id spells "u'" or starts with it
    assert bias.boosted(opened, PARAMS) == cup
    cup.append(ID[b"fork"])  # a caller's list is its own
    assert bias.boosted(opened, PARAMS) == ids(b"up")


def test_a_name_off_every_listed_one_gets_no_boost() -> None:
    assert BIAS.boosted(ids(b"o", b"('", b"fork"), PARAMS) == []


def test_add_puts_the_bias_on_boosted_ids_of_the_rows_that_copy() -> None:
    logits = torch.zeros((2, len(SPELLED)))
    rows = [(0, ids(b"o", b"('", b"c")), (1, ids(b"o"))]
    inside = BIAS.add(logits, [(row, BIAS.boosted(g, PARAMS), PARAMS.copy_bias) for row, g in rows])
    assert inside == 1
    expected = torch.zeros(len(SPELLED))
    expected[ID[b"up"]] = 5.0
    assert torch.equal(logits[0], expected)
    assert torch.equal(logits[1], torch.zeros(len(SPELLED)))


def test_copy_params_are_checked_by_name() -> None:
    assert copies(PARAMS)
    assert not copies(dataclasses.replace(PARAMS, copy_bias=0.0))
    assert not copies(dataclasses.replace(PARAMS, copy_names=()))
    check_copy_params(PARAMS)
    with pytest.raises(ValueError, match="copy_bias"):
        check_copy_params(dataclasses.replace(PARAMS, copy_bias=-1.0))
    with pytest.raises(ValueError, match="copy_bias"):
        check_copy_params(dataclasses.replace(PARAMS, copy_bias=float("inf")))
    with pytest.raises(ValueError, match="copy_quote"):
        check_copy_params(dataclasses.replace(PARAMS, copy_quote="''"))
    with pytest.raises(ValueError, match="copy_names"):
        check_copy_params(dataclasses.replace(PARAMS, copy_names=("it's",)))
    with pytest.raises(ValueError, match="copy_names"):
        check_copy_params(dataclasses.replace(PARAMS, copy_names=("",)))
    with pytest.raises(ValueError, match="copy_openers"):
        check_copy_params(dataclasses.replace(PARAMS, copy_openers=("",)))
    with pytest.raises(ValueError, match="copy_openers"):
        check_copy_params(dataclasses.replace(PARAMS, copy_openers=("x" * 33,)))
