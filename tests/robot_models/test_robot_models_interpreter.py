# mypy: disable-error-code="no-untyped-def"
import random

import pytest

from robot_models.errors import PlanRuntimeError
from robot_models.executors import SimulatedExecutor, SimulatedWorld, SkillExecutor
from robot_models.interpreter import PlanInterpreter
from robot_models.language import load_language


class VirtualSleep:
    def __init__(self):
        self.now = 0.0

    def __call__(self, seconds):
        assert seconds >= 0
        self.now += seconds


def run(robot, plan, present=(), seed=0):
    sleep = VirtualSleep()
    executor = SimulatedExecutor(
        robot, random.Random(seed), sleep=sleep, world=SimulatedWorld(set(present))
    )
    outcome = PlanInterpreter(executor).run(load_language(robot).parse(plan))
    return outcome, executor, sleep


def shorts(outcome):
    return [bound.short for bound, _ in outcome.calls]


def test_simulated_executor_satisfies_the_protocol():
    assert isinstance(SimulatedExecutor("drone"), SkillExecutor)


def test_search_plan_runs_the_block_only_when_the_target_is_found():
    plan = "?sw('cat')==True{o('cat');a('cat');tp();}"
    found, _, _ = run("drone", plan, present={"cat"})
    assert shorts(found) == ["sw", "o", "a", "tp"]
    missing, _, _ = run("drone", plan)
    assert shorts(missing) == ["sw"]


def test_loop_with_return_stops_the_plan():
    plan = "8{?iv('dog')==True{->True;}tc(45);}->False;"
    outcome, _, _ = run("drone", plan, present={"dog"})
    assert outcome.returned and outcome.value is True
    assert shorts(outcome) == ["iv"]
    outcome, _, _ = run("drone", plan)
    assert outcome.value is False
    assert shorts(outcome).count("tc") == 8


def test_variables_carry_values_between_statements():
    outcome, _executor, _ = run("drone", "_1=ox('cat');lg(_1);", present={"cat"})
    (_, x), (log_call, _) = outcome.calls
    assert 0.0 <= x <= 1.0
    assert log_call.args == (x,)


def test_execution_time_is_the_sampled_duration_on_the_injected_clock():
    _outcome, executor, sleep = run("drone", "tk();mf(100);tc(90);ld();", seed=5)
    assert len(executor.history) == 4
    assert sleep.now == pytest.approx(sum(r.duration_s for r in executor.history))
    low, _ = load_language("drone").estimate_execution_s(
        load_language("drone").parse("tk();mf(100);tc(90);ld();")
    )
    assert sleep.now >= low


def test_progress_is_reported_up_to_completion():
    fractions: list[float] = []
    executor = SimulatedExecutor("arm", random.Random(0), sleep=lambda s: None, progress_steps=5)
    interpreter = PlanInterpreter(executor, on_call=lambda call: fractions.append)
    interpreter.run(load_language("arm").parse("hm();"))
    assert fractions == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])


def test_arm_desk_cleaning_picks_only_present_objects():
    plan = (
        "hm();?lk('cup')==True{pk('cup');pl('tray');}?lk('pen')==True{pk('pen');pl('holder');}hm();"
    )
    outcome, _, _ = run("arm", plan, present={"pen"})
    assert [str(b) for b, _ in outcome.calls] == [
        "hm()",
        "lk('cup')",
        "lk('pen')",
        "pk('pen')",
        "pl('holder')",
        "hm()",
    ]


def test_statements_can_be_run_one_at_a_time_as_they_stream():
    language = load_language("drone")
    executor = SimulatedExecutor("drone", random.Random(0), sleep=lambda s: None)
    interpreter = PlanInterpreter(executor)
    parser = language.new_parser()
    for chunk in ["mf(1", "00);t", "c(90);->", "True;tp();"]:
        for statement in parser.feed(chunk):
            interpreter.run_statement(statement)
    assert interpreter.outcome.returned
    assert [b.short for b, _ in interpreter.outcome.calls] == [
        "mf",
        "tc",
    ]  # nothing after the return


def test_runtime_argument_out_of_range_is_a_plan_runtime_error():
    with pytest.raises(PlanRuntimeError, match="distance"):
        run("drone", "_1=ox('cat');mf(_1);", present={"cat"})


def test_comparing_incomparable_values_is_a_plan_runtime_error():
    with pytest.raises(PlanRuntimeError, match="cannot compare"):
        run("drone", "?iv('cat')<'a'{tp();}")


def test_executor_rejects_invalid_calls_itself():
    from robot_models.plan_ast import BoundCall

    executor = SimulatedExecutor("drone", sleep=lambda s: None)
    with pytest.raises(ValueError, match="move_forward"):
        executor.execute(BoundCall("move_forward", "mf", (5,)))
    with pytest.raises(ValueError, match="progress_steps"):
        SimulatedExecutor("drone", progress_steps=0)
