"""Fuzzing: any text yields statements or one of the documented errors, never
anything else and never a hang; the parser agrees with itself under chunking."""

# mypy: disable-error-code="no-untyped-def"

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_models.dataset import LRTRACE_TASKS
from robot_models.errors import PlanSyntaxError, SkillValidationError
from robot_models.parser import PlanParser
from robot_models.skills import SkillSet

SEEDS = [t.golden_plan for t in LRTRACE_TASKS if t.robot_type == "drone"]
ALPHABET = "mftcuiv()_{}?;,'=!<>-&|.0123456789 abTrueFalsx\n#"
DOCUMENTED = (PlanSyntaxError, SkillValidationError)


def run(text, chunks=1):
    parser = PlanParser(SkillSet.load("drone"))
    size = max(1, len(text) // chunks)
    out = []
    try:
        for i in range(0, len(text), size):
            out += parser.feed(text[i : i + size])
        out += parser.close()
    except DOCUMENTED as error:
        return ("error", type(error).__name__, str(error))
    return ("ok", tuple(s.text for s in out))


def check(text):
    whole = run(text)
    assert run(text, chunks=3) == whole
    if whole[0] == "ok":
        joined = "".join(whole[1])
        assert text.startswith(joined)
        assert text[len(joined) :].strip() == ""  # only trailing whitespace is outside statements


@given(st.text(alphabet=ALPHABET, max_size=80))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_text_raises_only_documented_errors(text):
    check(text)


@given(st.text(max_size=40))
@settings(max_examples=150, deadline=None)
def test_arbitrary_unicode_raises_only_documented_errors(text):
    check(text)


@st.composite
def mutated_plans(draw):
    plan = list(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "swap"]))
        i = draw(st.integers(0, max(0, len(plan) - 1)))
        char = draw(st.sampled_from(ALPHABET))
        if op == "insert":
            plan.insert(i, char)
        elif op == "delete" and plan:
            del plan[i]
        elif op == "replace" and plan:
            plan[i] = char
        elif op == "swap" and len(plan) > 1:
            j = draw(st.integers(0, len(plan) - 1))
            plan[i], plan[j] = plan[j], plan[i]
    return "".join(plan)


@given(mutated_plans())
@settings(max_examples=400, deadline=None)
def test_mutated_plans_raise_only_documented_errors(text):
    check(text)


def test_a_long_plan_streams_through_in_small_chunks():
    text = "mf(100);tc(90);" * 2000
    parser = PlanParser(SkillSet.load("drone"))
    count = 0
    for i in range(0, len(text), 7):
        count += len(parser.feed(text[i : i + 7]))
    assert count + len(parser.close()) == 4000
