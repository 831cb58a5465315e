"""The grammar args a generation's vLLM requests carry (grammar_args.py): what the
engines write is what the processor reads, and malformed args (external input to a
vLLM server) are refused naming the field."""

from __future__ import annotations

from dataclasses import replace

import pytest

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.vllm.grammar_args import PREFIX, GrammarArgs, grammar_args


def test_the_wire_args_read_back_as_written() -> None:
    params = SamplingParams(
        max_tokens=90, grammar="start: /a+/", close_within=8, closing_ids=(94,),
        hard_closing_ids=(28, 265, 8), copy_names=("salt shaker", "7"), copy_bias=9.5,
        copy_openers=("sw(", ","), copy_values=("120", "-100"), copy_value_openers=("mu(", ","),
        copy_distinct_after=("pk(", "st("), copy_distinct_openers=("pl(", ","),
    )  # fmt: skip
    wire = grammar_args(
        replace(params, closing_banned_ids=(30, 31)),
        40,
        True,
        closing_from=12,
        observed=[(3, 9), (12, 15)],
        closing_within=5,
    )
    assert wire is not None
    # vLLM's xargs types: str, int, float, or a list of them
    assert all(isinstance(v, (str, int, float, list)) for v in wire.values())
    args = GrammarArgs.read(wire)
    assert args == GrammarArgs(
        grammar="start: /a+/", plan_start=40, plan_observed=(3, 9, 12, 15), max_tokens=90,
        close_within=8,
        closing_ids=(94,), hard_closing_ids=(28, 265, 8), closing=True, closing_from=12,
        closing_within=5, closing_banned_ids=(30, 31),
        copy_names=("salt shaker", "7"), copy_bias=9.5, copy_quote="'",
        copy_openers=("sw(", ","), copy_values=("120", "-100"), copy_value_openers=("mu(", ","),
        copy_distinct_after=("pk(", "st("), copy_distinct_openers=("pl(", ","),
    )  # fmt: skip
    assert args.observed_spans() == [(3, 9), (12, 15)]
    assert grammar_args(SamplingParams(), 40, False) is None  # no grammar, no args


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hard_closing_ids", [28, -1]),
        ("closing_ids", [-5]),
        ("closing_from", -1),
        ("closing_within", -1),
        ("closing_banned_ids", [3, -2]),
        ("plan_observed", [3]),  # no end
        ("plan_observed", [5, 2]),
        ("plan_observed", [1, 4, 3, 6]),  # overlapping
        ("plan_observed", [-2, 1]),
        ("copy_bias", -0.5),
        ("copy_bias", float("nan")),
        ("copy_quote", "''"),
        ("copy_names", ["it's"]),
        ("copy_names", [""]),
        ("copy_openers", [""]),
        ("copy_openers", ["x" * 33]),
        ("copy_values", ["1e5"]),  # with no opener to pair with, too
        ("copy_value_openers", [""]),
        ("copy_distinct_after", ["pk("]),  # with no opener to pair with
        ("copy_distinct_openers", ["x" * 33]),
    ],
)
def test_malformed_args_are_refused_naming_the_field(field: str, value: object) -> None:
    wire = grammar_args(SamplingParams(grammar="start: /a+/"), 3, False)
    assert wire is not None
    with pytest.raises(ValueError, match=field):
        GrammarArgs.read(wire | {PREFIX + field: value})
