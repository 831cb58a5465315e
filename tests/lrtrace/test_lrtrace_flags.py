"""`lrtrace replay` refuses a flag the chosen target would ignore whenever it is given,
even with its default's value, and `--handling-strategy` when every policy brings its
own (the CLI's exit status and line: test_lrtrace_cli_errors)."""

from __future__ import annotations

import pytest

from lrtrace.cli import DEFAULT_PROFILE, _parser
from lrtrace.commands import _given_flags
from lrtrace.errors import LrtraceError
from lrtrace.replay.targets.flags import APPLIES_TO, refuse_ignored, strategy_ignored_by


def given(*argv: str) -> list[str]:
    return _given_flags(_parser().parse_args(["replay", "t.lrt", "-o", "r.json", *argv]))


def test_flags_not_on_the_command_line_are_not_given() -> None:
    assert given() == []
    assert given("--threads", "2", "--model", "m", "--max-batch", "4") == [
        "--model",
        "--threads",
        "--max-batch",
    ]


def test_a_flag_given_with_its_defaults_value_is_given() -> None:
    assert given("--profile", DEFAULT_PROFILE, "--target", "service") == ["--profile"]
    with pytest.raises(LrtraceError, match="--profile has no effect with --target service"):
        refuse_ignored("service", given("--profile", DEFAULT_PROFILE))


def test_handling_strategy_with_policies_that_bring_their_own() -> None:
    assert strategy_ignored_by(["lamps"], None) is None
    assert strategy_ignored_by(["timely", "fcfs"], "ttl") is None
    with pytest.raises(LrtraceError, match="no effect with --policy lamps,infercept"):
        strategy_ignored_by(["lamps", "infercept"], "ttl")
    note = strategy_ignored_by(["timely", "lamps"], "ttl")
    assert note == "--handling-strategy ttl applies to timely only; lamps brings its own"


@pytest.mark.parametrize("flag", sorted(APPLIES_TO))
def test_each_flag_is_taken_where_it_acts_and_refused_elsewhere(flag: str) -> None:
    for target in ("sim", "service", "ros"):
        if target in APPLIES_TO[flag]:
            refuse_ignored(target, [flag])
        else:
            with pytest.raises(
                LrtraceError, match=rf"^{flag} has no effect with --target {target}"
            ):
                refuse_ignored(target, [flag])


def test_flags_for_every_target_are_never_refused() -> None:
    for target in ("sim", "service", "ros"):
        refuse_ignored(target, ["--policy", "--network-latency-ms"])
