"""The copy bias's rule (engine/copy_bias.py) on a small vocabulary: which ids go on
spelling a listed name, only inside a quoted name (with openers, only one opened
right after an opener), up to and including the closing quote; values (numbers)
right after their openers, with the ids the tokenizer writes each with; no push
toward the name a name must differ from; and the parameters refused by name."""

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
    b"',",  # 16
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
    assert after_cup == sorted(ids(b"'", b"');", b"',", b" b"))
    after_board = BIAS.boosted(ids(b"o", b"('", b"cup", b" b", b"oard"), PARAMS)
    assert after_board == sorted(ids(b"'", b"');", b"',"))


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


def test_quotes_in_an_observation_are_not_the_plans() -> None:
    """An observation with an odd number of quotes (a robot's error `can't reach`)
    leaves the plan outside a name: its spans are not counted."""
    prompt = ids(b"fork")
    observation = ids(b"lg", b"('")  # a quote never closed
    plan = [*prompt, *ids(b"o", b"('", b"cup", b"');"), *observation, *ids(b"c")]
    spans = [(4, 6)]  # from the prompt's end
    got, scan = BIAS.boosted_scan(plan, len(prompt), PARAMS, None, spans)
    assert got == [] and scan.parity == 0
    got, _ = BIAS.boosted_scan(plan, len(prompt), PARAMS, None)
    assert got == ids(b"up")  # counted, the observation's quote would open a name
    plan += ids(b"o", b"('")
    got, _ = BIAS.boosted_scan(plan, len(prompt), PARAMS, scan, spans)
    assert got == sorted(ids(b"c", b"cu", b"cup"))  # the plan's own quote opens one


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


DISTINCT = dataclasses.replace(
    PARAMS,
    copy_names=("cup", "cup board", "fork"),
    copy_openers=("o(", "ta(", ","),
    copy_distinct_after=("o(", "o("),
    copy_distinct_openers=("ta(", ","),
)


def test_a_name_gets_no_push_toward_the_name_it_must_differ_from() -> None:
    # `o('cup');ta('cup`: "cup" must not end here, "cup board" still goes on
    after_cup = BIAS.boosted(ids(b"o", b"('", b"cup", b"');", b"ta", b"('", b"cup"), DISTINCT)
    assert after_cup == ids(b" b")
    opened = BIAS.boosted(ids(b"o", b"('", b"cup", b"');", b"ta", b"('"), DISTINCT)
    assert opened == sorted(ids(b"c", b"cu", b"cup", b"fork"))  # "cup board" starts so
    # the second argument of the same call: `o('cup','cup`
    same_call = BIAS.boosted(ids(b"o", b"('", b"cup", b"',", b"'", b"cup"), DISTINCT)
    assert same_call == ids(b" b")
    # "fork" held: "cup" may end
    after_fork = BIAS.boosted(ids(b"o", b"('", b"fork", b"');", b"ta", b"('", b"cup"), DISTINCT)
    assert after_fork == sorted(ids(b"'", b"');", b"',", b" b"))


def test_a_name_differs_only_from_the_one_right_before_its_opener() -> None:
    # without the pairs, the same name may end
    plain = dataclasses.replace(DISTINCT, copy_distinct_after=(), copy_distinct_openers=())
    plan = ids(b"o", b"('", b"cup", b"');", b"ta", b"('", b"cup")
    assert BIAS.boosted(plan, plain) == sorted(ids(b"'", b"');", b"',", b" b"))
    # a quoted text between (`lg('fork')`) is what came right before: "cup" may end
    between = ids(b"o", b"('", b"cup", b"');", b"lg", b"('", b"fork", b"');", b"ta", b"('", b"cup")
    assert BIAS.boosted(between, DISTINCT) == sorted(ids(b"'", b"');", b"',", b" b"))
    # the pair's `after` must open that name: `ta('cup');ta('cup` is not `o(` then `ta(`
    other = ids(b"ta", b"('", b"cup", b"');", b"ta", b"('", b"cup")
    assert BIAS.boosted(other, DISTINCT) == sorted(ids(b"'", b"');", b"',", b" b"))


def test_names_to_differ_from_kept_as_ids_come_give_what_a_full_count_gives() -> None:
    # worked out once a name and kept in the scan: the same as from scratch each step
    plan = ids(b"o", b"('", b"cup", b"');", b"ta", b"('", b"c", b"up", b"');", b"o", b"('")
    plan += ids(b"fork", b"');", b"ta", b"('", b"cup")
    tokens: list[int] = []  # one list, growing, as a generation's
    scan = None
    for token in plan:
        tokens.append(token)
        got, scan = BIAS.boosted_scan(tokens, 0, DISTINCT, scan)
        assert got == BIAS.boosted(list(tokens), DISTINCT), tokens
    assert scan is not None and scan.held == {b"fork"}
    assert got == sorted(ids(b"'", b"');", b"',", b" b"))  # after fork: "cup" may end


def test_when_every_name_is_the_one_to_differ_from_nothing_is_boosted() -> None:
    only_cup = dataclasses.replace(DISTINCT, copy_names=("cup",))
    assert BIAS.boosted(ids(b"o", b"('", b"cup", b"');", b"ta", b"('"), only_cup) == []


def test_distinct_pairs_are_checked_by_name() -> None:
    check_copy_params(DISTINCT)
    with pytest.raises(ValueError, match="copy_distinct_after and copy_distinct_openers"):
        check_copy_params(dataclasses.replace(DISTINCT, copy_distinct_openers=("ta(",)))
    with pytest.raises(ValueError, match="copy_distinct_openers"):
        check_copy_params(dataclasses.replace(DISTINCT, copy_distinct_openers=("", ",")))


# values: digits written with their place, as the planner's tokenizer does (a
# hundreds "1" is not a units "1"); each entry (id, what it spells, what it is)
VALUE_TOKENS = [
    (0, b"<eos>", "eos"),
    (1, b"mu", "mu"),
    (2, b"(", "("),
    (3, b"1", "1__"),  # hundreds
    (4, b"0", "_0_"),  # tens
    (5, b"0", "__0"),  # units
    (6, b"1", "__1"),  # units
    (7, b"2", "2__"),  # hundreds
    (8, b",", ","),
    (9, b",-", ",-"),
    (10, b"-", "-"),
    (11, b"e", "e"),
    (12, b");", ");"),
    (13, b"5", "_5_"),  # tens
]
VID = {name: token_id for token_id, _, name in VALUE_TOKENS}
WRITTEN = {
    "100": ["1__", "_0_", "__0"],
    "-200": ["-", "2__", "_0_", "__0"],
    "150": ["1__", "_5_", "__0"],
    "1": ["__1"],
}
VALUE_BIAS = CopyBias(
    TokenBytes(tokens=[spelled for _, spelled, _ in VALUE_TOKENS], special=frozenset({0})),
    encode=lambda text: [VID[name] for name in WRITTEN[text]],
)
VALUES = SamplingParams(
    copy_values=("100", "150", "-200"), copy_value_openers=("mu(", "mu(", ","), copy_bias=5.0
)


def vids(*names: str) -> list[int]:
    return [VID[n] for n in names]


def test_right_after_its_opener_a_value_starts_with_its_own_first_id() -> None:
    # the hundreds "1" of 100 and 150, not the units "1" that spells the same
    assert VALUE_BIAS.boosted_values(vids("mu", "("), 0, VALUES) == vids("1__")
    assert VALUE_BIAS.boosted_values(vids("mu"), 0, VALUES) == []  # not opened yet


def test_a_value_goes_on_with_the_ids_its_tokenizer_writes_it_with() -> None:
    assert VALUE_BIAS.boosted_values(vids("mu", "(", "1__"), 0, VALUES) == sorted(
        vids("_0_", "_5_")
    )
    assert VALUE_BIAS.boosted_values(vids("mu", "(", "1__", "_0_"), 0, VALUES) == vids("__0")
    # written out: nothing more to add; begun with other ids (a units 1): no value of it
    assert VALUE_BIAS.boosted_values(vids("mu", "(", "1__", "_0_", "__0"), 0, VALUES) == []
    assert VALUE_BIAS.boosted_values(vids("mu", "(", "__1"), 0, VALUES) == []


def test_a_sign_may_share_a_token_with_its_opener() -> None:
    opened = vids("mu", "(", "1__", "_0_", "__0")
    assert VALUE_BIAS.boosted_values(opened + vids(","), 0, VALUES) == vids("-")
    assert VALUE_BIAS.boosted_values(opened + vids(",", "-"), 0, VALUES) == vids("2__")
    assert VALUE_BIAS.boosted_values(opened + vids(",-"), 0, VALUES) == vids("2__")
    assert VALUE_BIAS.boosted_values(opened + vids(",-", "2__"), 0, VALUES) == vids("_0_")


def test_an_opener_that_is_a_word_opens_only_at_a_word_start() -> None:
    assert VALUE_BIAS.boosted_values(vids("e", "mu", "("), 0, VALUES) == []
    # before `start` (the prompt) nothing counts, not even an opener
    assert VALUE_BIAS.boosted_values(vids("mu", "("), 2, VALUES) == []


def test_values_join_the_names_and_need_the_engines_tokenizer() -> None:
    both = dataclasses.replace(VALUES, copy_names=("cup",))
    ids_, _ = VALUE_BIAS.boosted_scan(vids("mu", "("), 0, both, None)
    assert ids_ == vids("1__")
    assert copies(dataclasses.replace(PARAMS, copy_names=(), copy_values=("1",),
                                      copy_value_openers=("(",)))  # fmt: skip
    no_tokenizer = CopyBias(TokenBytes(tokens=[s for _, s, _ in VALUE_TOKENS], special=frozenset()))
    assert no_tokenizer.boosted_values(vids("mu", "("), 0, VALUES) == []


@pytest.mark.parametrize(
    ("values", "openers", "field"),
    [
        (("100",), (), "copy_value_openers"),
        (("1e5",), ("mu(",), "copy_values"),
        (("",), ("mu(",), "copy_values"),
        (("12.3.4",), ("mu(",), "copy_values"),
        (("1" * 17,), ("mu(",), "copy_values"),
        (("100",), ("",), "copy_value_openers"),
    ],
)
def test_value_params_are_checked_by_name(
    values: tuple[str, ...], openers: tuple[str, ...], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        check_copy_params(
            dataclasses.replace(VALUES, copy_values=values, copy_value_openers=openers)
        )
