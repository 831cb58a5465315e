"""`lrtrace replay` refuses a flag the chosen target would ignore, unless the flag is
left at its default (the CLI's exit status and line: test_lrtrace_cli_errors)."""

from __future__ import annotations

import pytest

from lrtrace.cli import DEFAULT_PROFILE, _parser
from lrtrace.commands import _given_flags
from lrtrace.errors import LrtraceError
from lrtrace.replay.targets.flags import APPLIES_TO, refuse_ignored


def given(*argv: str) -> list[str]:
    return _given_flags(_parser().parse_args(["replay", "t.lrt", "-o", "r.json", *argv]))


def test_flags_at_their_default_are_not_given() -> None:
    assert given() == []
    assert given("--profile", DEFAULT_PROFILE, "--target", "service") == []
    assert given("--threads", "2", "--model", "m", "--max-batch", "4") == [
        "--model",
        "--threads",
        "--max-batch",
    ]


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
