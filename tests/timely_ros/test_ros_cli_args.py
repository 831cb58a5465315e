"""`timely`'s own checks of its arguments: each refused with exit status 2, naming the
argument, before any planner is contacted (no DDS here)."""

from __future__ import annotations

import pytest
from timely_ros.cli import main

ROBOT_ID_RULE = "use a letter, then letters, digits or '_' (at most 64)"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # one robot id check (the planner's pattern) for every command that names one
        (["plan", "--robot", "drone 1", "go"],
         f"argument --robot: robot id 'drone 1': {ROBOT_ID_RULE}"),
        (["plan", "--robot", "", "go"], "argument --robot: robot id ''"),
        (["scene", "--robot", "1drone", "a sofa"], "argument --robot: robot id '1drone'"),
        (["scene", "--robot", "drone-1", "a sofa"], "argument --robot: robot id 'drone-1'"),
        (["cancel", "--robot", "drone 1"], "argument --robot: robot id 'drone 1'"),
        (["approve", "--robot", "arm/1"], "argument --robot: robot id 'arm/1'"),
        (["plan", "--robot", "drone1", ""], "argument instruction: the instruction is empty"),
        (["plan", "--robot", "drone1", "  "], "argument instruction: the instruction is empty"),
        # the planner's lengths, checked before it is contacted
        (["plan", "--robot", "drone1", "x" * 2001],
         "argument instruction: the instruction has 2001 characters; the planner takes at most"),
        (["plan", "--robot", "drone1", "--scene", "x" * 8001, "go"],
         "argument --scene: the scene has 8001 characters; the planner takes at most 8000"),
        (["plan", "--robot", "drone1", "--resubmit", "-2", "go"],
         "argument --resubmit: expected a whole number >= 0, got '-2'"),
        (["plan", "--robot", "drone1", "--resubmit", "x", "go"], "expected a whole number >= 0"),
        (["plan", "--robot", "drone1", "--respond-within", "-1", "go"],
         "argument --respond-within: expected a finite number of seconds > 0, got '-1'"),
        (["plan", "--robot", "drone1", "--respond-within", "0", "go"],
         "expected a finite number of seconds > 0, got '0'"),
        (["plan", "--robot", "drone1", "--respond-within", "x", "go"],
         "expected a finite number of seconds > 0, got 'x'"),
        # an empty topic is a slip, not a request for the default
        (["scene", "--robot", "drone1", "--topic", "", "a sofa"],
         "argument --topic: the topic is empty; leave --topic out"),
        (["scene", "--robot", "drone1", "--topic", " ", "a sofa"], "the topic is empty"),
        # finding a planner takes time: a wait of 0 could only fail
        (["status", "--wait", "0"], "argument --wait: expected seconds > 0 (inf: for ever)"),
        (["plan", "--robot", "drone1", "--wait", "0", "go"], "expected seconds > 0"),
        # a result wait no thread can wait (Event.wait: OverflowError)
        (["plan", "--robot", "drone1", "--timeout", "1e12", "go"],
         "argument --timeout: expected seconds <= 9.22e+09, got '1e12'"),
    ],
)  # fmt: skip
def test_arguments_are_refused_before_any_planner_is_contacted(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "topic name" not in err  # (scene: no --topic was given to complain about)


@pytest.mark.parametrize("goal_id", ["0" * 32, "00000000-0000-0000-0000-000000000000"])
def test_cancel_refuses_the_all_zero_goal_id(
    goal_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """To the action's cancel service the zero id means every goal: `--all` says so."""
    assert main(["cancel", goal_id]) == 2
    err = capsys.readouterr().err
    assert "all zeros, which ROS reads as every goal" in err and "--all" in err, err


def test_a_good_robot_id_and_resubmit_count_pass() -> None:
    from timely_ros.cli import _parser

    args = _parser().parse_args(["plan", "--robot", "Drone_1", "--resubmit", "0", "go"])
    assert (args.robot, args.resubmit, args.instruction) == ("Drone_1", 0, "go")
    args = _parser().parse_args(["cancel", "--all"])
    assert args.robot is None  # not given: no robot check


@pytest.mark.parametrize(
    "extra", [["--deny"], ["--reason", "why"], ["--robot", "drone1"], ["ab12"]]
)
def test_approve_list_takes_no_answer(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`--list` beside an answer's options would drop them without a word."""
    assert main(["approve", "--list", *extra]) == 2
    assert "--list only lists" in capsys.readouterr().err


def test_a_request_id_is_matched_by_enough_of_it_in_any_case() -> None:
    from timely_ros.approve_cli import _by_id

    pending = [{"request_id": "ab12cd"}, {"request_id": "ab34ef"}, {"request_id": "ab"}]
    assert _by_id(pending, "AB12") == [pending[0]]
    assert _by_id(pending, "ab") == [pending[2]]  # a whole id before the prefixes it starts
    assert _by_id(pending, "ab3") == [pending[1]]
    assert len(_by_id(pending, "a")) == 3 and _by_id(pending, "zz") == []
