"""The plan grammar against the parser, both ways: every golden plan is in the
grammar; every string the grammar generates parses and passes the skill checks;
the limits sit exactly where the parser and the skill set put them; near-miss
plans are in the grammar exactly when the parser takes them (canonical ones)."""

# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_models.dataset import LRTRACE_TASKS, build_dataset
from robot_models.language import load_language
from robot_models.parser import MAX_LOOP_COUNT, MAX_NESTING, PlanParser
from robot_models.skills import MAX_STRING_ARG_CHARS, SkillSet
from tests.robot_models.grammar_support import (
    grammar_accepts,
    grammar_prefix,
    is_canonical,
    random_plan,
)

ROBOTS = ("drone", "arm")


def parser_accepts(robot_type: str, text: str) -> bool:
    """Valid as the service and `check_plan` judge: parses whole, one statement or more."""
    try:
        return bool(load_language(robot_type).parse(text))
    except ValueError:
        return False


@pytest.fixture(scope="module")
def golden() -> list[tuple[str, str]]:
    data = build_dataset()
    examples = [*data.train, *data.heldout, *data.lrtrace]
    return [(e.robot_type, e.plan) for e in examples]


def test_every_golden_plan_is_in_the_grammar(golden: list[tuple[str, str]]) -> None:
    assert len(golden) > 8000
    rejected = [(r, p) for r, p in golden if not grammar_accepts(r, p)]
    assert rejected == []


@pytest.mark.parametrize(
    ("robot_type", "text"),
    [
        ("drone", "}"),
        ("drone", "mu(0);"),
        ("drone", "mu(1100);"),
        ("arm", "mu(50);"),
        ("drone", "tp();}"),
        ("drone", "mu(50)"),  # no terminator
        ("drone", ""),  # empty plan
        ("drone", "?iv('cat')==True{tp();"),  # block never closed
        ("drone", "mf(100,20);"),  # arity
        ("drone", "tp(1);"),
        ("drone", "mf('100');"),  # type
        ("drone", "mf(100.0);"),
        ("drone", "dl(0.05);"),
        ("drone", "dl(31);"),
        ("drone", "lg(_1);"),  # variable not assigned
        ("drone", "?tp()==True{}"),  # a skill without a value used as one
        ("drone", "?iv('a')&iv('b')|iv('c'){}"),  # & and | mixed
        ("drone", "0{tp();}"),
        ("drone", "101{tp();}"),
        ("drone", "o('');"),  # empty object name
        ("arm", "mt(100,0,300);"),
        ("arm", "mt(400,0,700);"),
        ("arm", "pk('cup')"),
        ("arm", "tk();"),
        ("drone", "pk('cup');"),
    ],
)
def test_known_bad_plans_are_rejected_by_both(robot_type: str, text: str) -> None:
    assert not parser_accepts(robot_type, text)
    assert not grammar_accepts(robot_type, text)


def _limit_cases(skill_set: SkillSet) -> list[tuple[str, bool]]:
    """(plan, valid) at both sides of every numeric limit of every skill."""
    cases = []
    for skill in skill_set.skills:
        for index, arg in enumerate(skill.args):
            samples = {"str": "'x'", "bool": "True", "any": "1"}
            base = [samples.get(a.type, f"{a.min or 1:g}") for a in skill.args]
            if arg.min is not None and arg.max is not None:
                inside = {arg.min, arg.max}
                outside = {arg.min - 1, arg.max + 1}
                if arg.type == "float":
                    inside |= {arg.min + 0.001}
                    outside |= {arg.min - 0.001, arg.max + 0.001}
                for value, ok in [(v, True) for v in inside] + [(v, False) for v in outside]:
                    text = f"{value:g}" if arg.type == "float" else str(int(value))
                    args = [*base[:index], text, *base[index + 1 :]]
                    cases.append((f"{skill.short}({','.join(args)});", ok))
            if arg.type == "str":
                for length, ok in [(1, True), (MAX_STRING_ARG_CHARS, True)]:
                    args = [*base[:index], "'" + "a" * length + "'", *base[index + 1 :]]
                    cases.append((f"{skill.short}({','.join(args)});", ok))
                args = [*base[:index], "'" + "a" * (MAX_STRING_ARG_CHARS + 1) + "'"]
                cases.append((f"{skill.short}({','.join(args + base[index + 1 :])});", False))
    return cases


@pytest.mark.parametrize("robot_type", ROBOTS)
def test_every_limit_sits_where_the_parser_puts_it(robot_type: str) -> None:
    cases = _limit_cases(SkillSet.load(robot_type))
    assert len(cases) > 20
    for text, valid in cases:
        assert parser_accepts(robot_type, text) == valid, text
        assert grammar_accepts(robot_type, text) == valid, text


def test_language_limits_sit_where_the_parser_puts_them() -> None:
    def nested(depth: int) -> str:
        return "?iv('a'){" * depth + "tp();" + "}" * depth

    free = 126  # the lexer's 128-character token limit, two of them quotes
    cases = [
        (f"{MAX_LOOP_COUNT}{{tp();}}", True),
        ("1{tp();}", True),
        (nested(MAX_NESTING), True),
        (nested(MAX_NESTING + 1), False),
        # the parser takes these; the grammar never writes them (robot_models/grammar.py)
        ("?iv('a'){" * (MAX_NESTING + 1) + "}" * (MAX_NESTING + 1), False),  # empty blocks
        ("3{}tp();", False),
        ("?iv('a'){}", False),
        ("?True{tp();}", False),  # a constant condition
        ("?'cup'{tp();}", False),
        ("_1=iv('a');?0==_1{tp();}", False),
        ("_1=iv('a');?_1==0&iv('b')!='x'{tp();}", True),
        ("lg('a;b');", False),  # plan punctuation inside a string
        ("lg('(a)');", False),
        ("lg(' a ');", True),  # a message may have spaces at its ends, a name not
        ("iv(' a');", False),
        ("iv('a b');", True),
        ("iv('a,b');", False),
        ("lg('a, b');", True),
        ("iv('box #2 - blue');", True),
        (f"lg('{'a' * (free + 1)}');", True),
        (f"lg('{'a' * (free + 2)}');", False),
        ("lg('');", True),
        ("_1=iv('a');?_1==True{lg(_1);}", True),
        ("?iv('a'){_2=ox('a');}lg(_2);", True),  # assigned in a block, read after it
        ("_1=_1;", False),
        ("->True;tp();", True),  # the parser reads on after a return
        ("?iv('a')&iv('b')&ox('c')<0.5{tp();}", True),
        ("?ox('a')>=-0.25{tp();}", True),
        ("lg(-12.5);", True),
        ("tp();\n", False),  # whitespace: the grammar never writes it (parser: True)
    ]
    for text, valid in cases:
        assert grammar_accepts("drone", text) == valid, text
        if valid:
            assert parser_accepts("drone", text), text


@pytest.mark.parametrize(
    ("robot_type", "text"),
    [
        ("drone", "mf( 100);"),  # whitespace
        ("drone", "mf(0100);"),  # leading zero
        ("arm", "mt(400,0,-0);"),  # negative zero
        ("drone", "dl(1.0000000001);"),  # more than MAX_FRACTION_DIGITS decimals
        ("drone", "_x=iv('a');"),  # a variable not named _1 to _9
        ("drone", "_1=120;mf(_1);"),  # a variable for a typed argument
        ("drone", "_1=ox('a');?iv(_1)==True{}"),  # a variable for a typed argument
    ],
)
def test_documented_limits_of_the_grammar(robot_type: str, text: str) -> None:
    """Plans the parser takes but the grammar never writes (robot_models/grammar.py)."""
    assert parser_accepts(robot_type, text)
    assert not is_canonical(robot_type, text)
    assert not grammar_accepts(robot_type, text)


@pytest.mark.parametrize("robot_type", ROBOTS)
def test_strings_the_grammar_generates_parse_and_validate(robot_type: str) -> None:
    rng = random.Random(21)
    finished = 0
    for _ in range(300):
        text, ended = random_plan(robot_type, rng)
        if ended:
            finished += 1
            assert parser_accepts(robot_type, text), text
        else:
            PlanParser(SkillSet.load(robot_type)).feed(text)  # a valid prefix: no error
    assert finished > 200


ALPHABET = "mftcuivolkpg()_{}?;,'=!<>-&|.0123456789 aTrueFalsx1"
SEEDS = [(t.robot_type, t.golden_plan) for t in LRTRACE_TASKS] + [
    ("drone", "_1=ox('cat');?_1<0.4{tu(20);}lg(_1);dl(2.5);"),
    ("arm", "mt(420,-150,200);3{og();cg();}->True;"),
]


@st.composite
def near_misses(draw: st.DrawFn) -> tuple[str, str]:
    robot_type, plan = draw(st.sampled_from(SEEDS))
    chars = list(plan)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "cut"]))
        i = draw(st.integers(0, max(0, len(chars) - 1)))
        char = draw(st.sampled_from(ALPHABET))
        if op == "insert":
            chars.insert(i, char)
        elif op == "delete" and chars:
            del chars[i]
        elif op == "replace" and chars:
            chars[i] = char
        else:
            chars = chars[:i]
    return robot_type, "".join(chars)


@given(near_misses())
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_near_misses_are_in_the_grammar_exactly_when_the_parser_takes_them(case) -> None:
    robot_type, text = case
    in_grammar = grammar_accepts(robot_type, text)
    valid = parser_accepts(robot_type, text)
    if in_grammar:
        assert valid, text
    elif valid:
        assert not is_canonical(robot_type, text), text
    assert grammar_prefix(robot_type, text) or not in_grammar


def test_the_language_serves_its_grammar_once() -> None:
    drone = load_language("drone")
    assert drone.grammar() is drone.grammar()
    for skill in drone.skill_set.skills:
        assert f'"{skill.short}"' in drone.grammar()
    assert load_language("arm").grammar() != drone.grammar()
