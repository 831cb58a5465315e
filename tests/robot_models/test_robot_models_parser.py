# mypy: disable-error-code="no-untyped-def"
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_models.dataset import LRTRACE_TASKS, build_dataset
from robot_models.errors import PlanSyntaxError, SkillValidationError
from robot_models.parser import PlanParser
from robot_models.plan_ast import CallStmt, If, Literal, Loop, Return
from robot_models.skills import SkillSet

DRONE_PLAN = (
    "tu(90);mf(100);?iv('cat')==True{o('cat');a('cat');}_1=sw('dog');"
    "8{?iv('x')==True&_1==False{->True;}tc(45);}->False;"
)
PLANS = [(t.robot_type, t.golden_plan) for t in LRTRACE_TASKS] + [("drone", DRONE_PLAN)]
PLANS += [(e.robot_type, e.plan) for e in build_dataset().heldout[::7]]


def parse_all(robot_type, text):
    parser = PlanParser(SkillSet.load(robot_type))
    return parser.feed(text) + parser.close()


@pytest.mark.parametrize(("robot_type", "plan"), PLANS)
def test_statement_is_reported_exactly_when_its_last_character_arrives(robot_type, plan):
    parser = PlanParser(SkillSet.load(robot_type))
    reported = []
    for index, char in enumerate(plan):
        for statement in parser.feed(char):
            assert statement.end == index + 1  # never earlier, never later
            assert plan[statement.end - 1] in ";}"
            reported.append(statement)
    assert parser.close() == []
    assert "".join(s.text for s in reported) == plan
    assert reported == parse_all(robot_type, plan)


def test_statements_carry_parsed_calls_and_nodes():
    statements = parse_all("drone", DRONE_PLAN)
    assert [s.text for s in statements][:3] == [
        "tu(90);",
        "mf(100);",
        "?iv('cat')==True{o('cat');a('cat');}",
    ]
    first = statements[0]
    assert isinstance(first.node, CallStmt)
    assert first.calls[0].name == "turn_ccw" and first.calls[0].short == "tu"
    assert first.calls[0].args == (Literal(90),)
    conditional = statements[2]
    assert isinstance(conditional.node, If)
    assert [c.name for c in conditional.calls] == ["is_visible", "orient", "approach"]
    assert isinstance(statements[4].node, Loop) and statements[4].node.count == 8
    assert isinstance(statements[5].node, Return)


def test_whitespace_between_tokens_belongs_to_the_following_statement():
    statements = parse_all("drone", "mf(100); \n tc( 90 );  ")
    assert [s.text for s in statements] == ["mf(100);", " \n tc( 90 );"]
    assert statements[1].calls[0].args == (Literal(90),)


def test_full_skill_names_are_accepted():
    (statement,) = parse_all("drone", "move_forward(120);")
    assert statement.calls[0].short == "mf"


def test_empty_plan_has_no_statements():
    assert parse_all("drone", "") == []
    assert parse_all("drone", "  ") == []


@given(st.sampled_from(PLANS), st.data())
@settings(max_examples=60, deadline=None)
def test_any_chunking_gives_identical_statements(robot_and_plan, data):
    robot_type, plan = robot_and_plan
    cuts = sorted(data.draw(st.sets(st.integers(0, len(plan)), max_size=12)))
    parser = PlanParser(SkillSet.load(robot_type))
    got = []
    previous = 0
    for cut in [*cuts, len(plan)]:
        got += parser.feed(plan[previous:cut])
        previous = cut
    got += parser.close()
    assert got == parse_all(robot_type, plan)


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("mf(100)x", 7, "';' after the skill call"),
        ("mf(100", 6, "',' or ')'"),
        ("?iv('a'){", 9, "'}'"),
        ("tc(45);;", 7, "a statement"),
        ("mf(-);", 4, "a digit or '>'"),
        ("mf(1.);", 5, "a digit after the decimal point"),
        ("lg('abc", 7, "closing quote"),
        ("0{tp();}", 0, "a loop count from 1 to 100"),
        ("lg(_x);", 3, "a variable assigned earlier"),
        ("?iv('a')==True&iv('b')==True|iv('c')==True{tp();}", 28, "do not mix"),
        ("mf(100);#", 8, "a skill call, variable, number"),
        ("a!b", 2, "'=' after '!'"),
    ],
)
def test_syntax_errors_give_position_and_expectation(text, position, expected):
    with pytest.raises(PlanSyntaxError) as info:
        parse_all("drone", text)
    assert info.value.position == position
    assert expected in info.value.expected
    assert str(position) in str(info.value)


def test_nesting_is_bounded():
    text = "?iv('a')==True{" * 12 + "tp();" + "}" * 12
    with pytest.raises(PlanSyntaxError, match="nested blocks"):
        parse_all("drone", text)


def test_unknown_skill_is_rejected_when_its_name_completes():
    parser = PlanParser(SkillSet.load("drone"))
    parser.feed("mf(100);pk")
    with pytest.raises(SkillValidationError) as info:
        parser.feed("(")
    assert info.value.skill == "pk"


def test_out_of_range_argument_is_rejected_before_the_call_closes():
    parser = PlanParser(SkillSet.load("drone"))
    parser.feed("mf(900")
    with pytest.raises(SkillValidationError) as info:
        parser.feed(")")
    assert (info.value.skill, info.value.argument) == ("move_forward", "distance")
    assert "[20, 500]" in str(info.value)


def test_call_without_value_cannot_be_used_as_a_value():
    with pytest.raises(SkillValidationError, match="returns nothing"):
        parse_all("drone", "_1=tp();")


def test_too_many_arguments_are_rejected():
    with pytest.raises(SkillValidationError, match="got more"):
        parse_all("drone", "mf(100,200);")


def test_a_failed_parser_keeps_raising_and_a_closed_one_refuses_input():
    parser = PlanParser(SkillSet.load("drone"))
    with pytest.raises(PlanSyntaxError):
        parser.feed("mf(100)x;")
    with pytest.raises(PlanSyntaxError):
        parser.feed("tp();")
    closed = PlanParser(SkillSet.load("drone"))
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        closed.feed("tp();")


def test_unfinished_statement_at_close_is_an_error():
    parser = PlanParser(SkillSet.load("drone"))
    assert parser.feed("mf(100);tc(9") != []
    with pytest.raises(PlanSyntaxError, match="end of plan"):
        parser.close()
