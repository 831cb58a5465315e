"""`timely plan`'s own time-utility options (`--respond-within`, `--zero-after`,
`--utility`) as a TUF, and one clear error per wrong combination."""

from __future__ import annotations

import pytest
from timely_ros.cli import main, plan_tuf
from timely_ros.config import ConfigError


def test_respond_within_alone_is_the_normal_presets_shape() -> None:
    tuf = plan_tuf(2.0, None, None)
    assert tuf is not None
    assert tuf.expected_response_time_s == 2.0 and tuf.initial_utility == 1.0
    assert tuf.zero_utility_time_s() == pytest.approx(3.0)  # 1.5 x, as normal's 1 -> 1.5 s
    assert tuf.utility(1.9) == 1.0 and tuf.utility(2.5) == pytest.approx(0.5)


def test_zero_after_and_utility_shape_it() -> None:
    tuf = plan_tuf(1.0, 5.0, 4.0)
    assert tuf is not None
    assert tuf.utility(0.5) == 4.0 and tuf.utility(3.0) == pytest.approx(2.0)
    assert tuf.zero_utility_time_s() == pytest.approx(5.0)


def test_no_option_is_a_preset() -> None:
    assert plan_tuf(None, None, None) is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ((None, 3.0, None), "--zero-after needs --respond-within"),
        ((None, None, 2.0), "--utility needs --respond-within"),
        ((2.0, 1.0, None), r"--zero-after \(1 s\) must be later than --respond-within \(2 s\)"),
        ((2.0, None, -1.0), "--utility must be a number > 0, got -1"),
        ((2.0, None, float("nan")), "--utility must be a number > 0, got nan"),
        ((1e9, None, None), "--respond-within: Input should be less than or equal to 86400"),
        ((2.0, None, 1e7), "--utility: Input should be less than or equal to 1000000"),
        ((1.0, 1.000001, 10.0), r"--zero-after \(the utility it loses per second\): Input"),
        # no --zero-after given: the slope is --respond-within's, at the default
        ((1e-300, None, None), r"--respond-within \(with --zero-after at its default, 1.5 x"),
    ],
)
def test_a_wrong_combination_names_the_option(
    options: tuple[float | None, float | None, float | None], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_tuf(*options)


def test_the_command_refuses_before_it_contacts_a_planner(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "--robot", "drone1", "--utility", "2", "find the cat"]) == 2
    assert "timely: --utility needs --respond-within" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse: the preset or its own, not both
        main(["plan", "--robot", "drone1", "--urgent", "--respond-within", "1", "x"])
    assert "not allowed with argument --urgent" in capsys.readouterr().err
