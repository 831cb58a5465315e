"""The drone's streamed skill `fp` (a path of legs): opt-in (the default drone's skills,
prompt and grammar are unchanged), its arity and ranges in the skill set, parser and
grammar, its execution time, the limits checked leg by leg, the interpreter running
it leg by leg, and `StreamedPath` (called directly) handing on each leg as it
completes and naming the first bad one."""

from __future__ import annotations

import pytest

from robot_models.errors import SkillValidationError
from robot_models.exec_time import ExecTimeModel, ExecutionRecord
from robot_models.executors import SimulatedExecutor
from robot_models.grammar import plan_grammar
from robot_models.interpreter import PlanInterpreter
from robot_models.language import load_language
from robot_models.limit_checker import LimitChecker
from robot_models.parser import PlanParser
from robot_models.plan_ast import BoundCall
from robot_models.safety_limits import SafetyLimits
from robot_models.skills import SkillSet
from robot_models.tools.path_stream import StreamedPath
from tests.robot_models.grammar_support import byte_tokenizer
from timely_core.tools.plugin import ToolCall, Unresolved

STREAMED = SkillSet.load("drone", streamed=True)
FENCE = {"x_min": -200, "x_max": 300, "y_min": -200, "y_max": 200, "z_min": 0, "z_max": 250}


def test_the_streamed_skill_is_opt_in() -> None:
    plain, streamed = load_language("drone"), load_language("drone", streamed_skills=True)
    assert plain.skill_set.find("fp") is None and streamed.skill_set.find("fp") is not None
    assert plain.grammar() == plan_grammar(SkillSet.load("drone"))
    assert "fp(" not in plain.prompt_prefix() and "fp(" not in plain.grammar()
    assert "- fp(forward:int, left:int, up:int, ...): fly a path" in streamed.prompt_prefix()


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ((100, 0), "takes 1 to 8 elements of 3 argument(s) each, got 2 argument(s)"),
        ((1, 2, 3) * 9, "takes 1 to 8 elements of 3 argument(s) each, got 27 argument(s)"),
        ((100, 0, 501), "argument 'up': 501 is out of range"),
    ],
)
def test_arity_and_ranges(args: tuple[int, ...], problem: str) -> None:
    STREAMED.validate_call("fp", (1, 2, 3) * 8)
    with pytest.raises(SkillValidationError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        STREAMED.validate_call("fp", args)


def test_parser_and_grammar_take_one_to_eight_legs() -> None:
    import llguidance

    grammar = llguidance.LLMatcher.grammar_from_lark(plan_grammar(STREAMED))

    def accepts(text: str) -> bool:
        matcher = llguidance.LLMatcher(byte_tokenizer(), grammar, log_level=0)
        return bool(matcher.consume_tokens(list(text.encode()))) and not matcher.is_error()

    eight = ",".join(["10,20,30"] * 8)
    for plan in (f"tk();fp({eight});", "fp(100,0,-50);", "fly_path(1,2,3,4,5,6);"):
        assert accepts(plan)
        assert PlanParser(STREAMED).feed(plan)[-1].calls[0].name == "fly_path"
    for bad in (f"fp({eight},1,2,3);", "fp(1,2);", "fp(1,2,3,4);", "fp(1,2,600);", "fp();"):
        assert not accepts(bad)
        with pytest.raises(ValueError):
            PlanParser(STREAMED).feed(bad)


def test_execution_time_is_per_leg() -> None:
    model = ExecTimeModel(STREAMED)
    low, mean = model.estimate(BoundCall("fly_path", "fp", (60, 0, 0, 0, 120, 0)))
    assert mean == pytest.approx(2 * 1.2 + 180 / 60)
    assert low == pytest.approx(mean * (1 - 2 * 0.08))
    # measured legs slower than modelled: the per-leg overhead grows, the rate stays
    records = [
        ExecutionRecord(BoundCall("fly_path", "fp", (forward, 0, 0)), seconds)
        for forward, seconds in ((60, 2.5), (120, 3.5))
    ]
    assert model.refit(records) == {"fly_path": 2}
    assert model.estimate(BoundCall("fly_path", "fp", (60, 0, 0)))[1] == pytest.approx(1.5 + 1)


def test_limits_name_the_first_leg_that_breaks_them() -> None:
    limits = SafetyLimits.model_validate({"geofence_cm": FENCE, "max_distance_cm": 1000})
    checker = LimitChecker(limits, STREAMED)
    statements = PlanParser(STREAMED).feed("tk();tu(90);fp(100,0,50,0,100,0,150,0,0);")
    verdicts = [checker.check(s) for s in statements]
    assert [v.status for v in verdicts] == ["ok", "ok", "violation"]
    # turned left: forward is +y; the third leg takes y to 250
    assert verdicts[2].value == (
        "fp(100,0,50,0,100,0,150,0,0) leg 3 (150,0,0): y would reach 250 cm, beyond 200 cm"
    )
    far = LimitChecker(SafetyLimits.model_validate({"max_distance_cm": 250}), STREAMED)
    [verdict] = [far.check(s) for s in PlanParser(STREAMED).feed("fp(0,0,200,0,120,0);")]
    assert verdict.limit == "max_distance_cm" and "leg 2 (0,120,0)" in verdict.value


def test_the_interpreter_runs_a_path_leg_by_leg() -> None:
    executor = SimulatedExecutor("drone", sleep=lambda _s: None)
    interpreter = PlanInterpreter(executor, STREAMED)
    interpreter.run(PlanParser(STREAMED).feed("tk();fp(100,0,50,0,100,0);ld();"))
    assert [str(call) for call, _ in interpreter.outcome.calls] == [
        "tk()",
        "fp(100,0,50)",
        "fp(0,100,0)",
        "ld()",
    ]


def _call(args: tuple[object, ...], complete: bool = False, before: str = "tk();") -> ToolCall:
    text = "fp(" + ",".join(str(a) for a in args) + (")" if complete else ",")
    return ToolCall("t", "drone1", 1, "fp", args, complete, text, before=before)  # type: ignore[arg-type]


def test_the_tool_hands_on_each_leg_once_and_stops_at_a_bad_one() -> None:
    tool = StreamedPath({"robot_type": "drone", "limits": {"geofence_cm": FENCE}})
    assert tool.skills == {"fp", "fly_path"}
    assert tool.on_partial(_call((100,))).kind == "ok"  # no leg complete yet
    assert tool.on_partial(_call((100, 0, 50))).value == ["fp(100,0,50)"]
    assert tool.on_partial(_call((100, 0, 50, 0))).kind == "ok"
    reply = tool.on_partial(_call((100, 0, 50, 0, 300, 0)))
    assert (reply.kind, reply.argument) == ("error", 3)
    assert "leg 2 (0,300,0): y would reach 300 cm, beyond 200 cm" in reply.message
    # after its error the call hands on nothing more
    assert tool.on_call(_call((100, 0, 50, 0, 300, 0, 10, 0, 0), complete=True)).kind == "ok"
    tool.on_task_end("t")
    # the same plan text before it, a fresh task: starts over
    assert tool.on_partial(_call((100, 0, 50))).value == ["fp(100,0,50)"]


@pytest.mark.parametrize(
    ("before", "args", "message"),
    [
        ("tk();", (100, Unresolved("_1")), "fp leg 1 left: '_1' is not a literal"),
        ("tk();", (100, 0, 900), "leg 1: skill 'fly_path', argument 'up': 900 is out of range"),
        ("tk();mb(150);", (-100, 0, 0), "geofence_cm.x_min: fp(-100,0,0) leg 1 (-100,0,0)"),
    ],
)
def test_the_tool_names_what_is_wrong(before: str, args: tuple[object, ...], message: str) -> None:
    tool = StreamedPath({"robot_type": "drone", "limits": {"geofence_cm": FENCE}})
    reply = tool.on_partial(_call(args, before=before))
    assert reply.kind == "error" and message in reply.message


def test_the_tool_does_not_stream_a_call_inside_a_block_or_held_for_approval() -> None:
    tool = StreamedPath({"robot_type": "drone"})
    assert tool.on_partial(_call((100, 0, 50), before="tk();2{")).kind == "ok"
    assert tool.on_call(_call((1, 2), complete=True, before="tk();2{")).kind == "error"
    held = StreamedPath({"robot_type": "drone", "limits": {"approval_skills": ["fp"]}})
    assert held.on_partial(_call((100, 0, 50))).kind == "ok"  # sent whole, once approved
    unlimited = StreamedPath({"robot_type": "drone"})
    assert unlimited.on_partial(_call((100, 0, 50), before="")).value == ["fp(100,0,50)"]
