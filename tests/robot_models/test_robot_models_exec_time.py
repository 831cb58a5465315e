# mypy: disable-error-code="no-untyped-def"
import random

import pytest

from robot_models.errors import SkillValidationError
from robot_models.exec_time import ExecTimeModel, ExecutionRecord
from robot_models.language import load_language
from robot_models.plan_ast import BoundCall
from robot_models.skills import ConstantTime, EmpiricalTime, LinearTime, SkillSet


def call(short, *args, robot="drone"):
    skill = SkillSet.load(robot).get(short)
    return BoundCall(skill.name, skill.short, args)


def test_linear_skill_grows_with_its_argument():
    model = ExecTimeModel.for_robot("drone")
    short_min, short_mean = model.estimate(call("mf", 50))
    long_min, long_mean = model.estimate(call("mf", 300))
    spec = SkillSet.load("drone").get("mf").exec_time
    assert isinstance(spec, LinearTime)
    assert short_mean == pytest.approx(spec.overhead_s + 50 / spec.rate)
    assert long_mean - short_mean == pytest.approx(250 / spec.rate)
    assert short_min < short_mean and long_min < long_mean


def test_empirical_skill_uses_its_profile():
    model = ExecTimeModel.for_robot("drone")
    spec = SkillSet.load("drone").get("sw").exec_time
    assert isinstance(spec, EmpiricalTime)
    low, mean = model.estimate(call("sw", "cat"))
    assert low == min(spec.samples_s)
    assert mean == pytest.approx(sum(spec.samples_s) / len(spec.samples_s))
    rng = random.Random(3)
    assert {model.sample(call("sw", "cat"), rng) for _ in range(200)} <= set(spec.samples_s)


def test_samples_stay_within_bounds_and_average_near_the_mean():
    model = ExecTimeModel.for_robot("drone")
    rng = random.Random(7)
    low, mean = model.estimate(call("tc", 90))
    samples = [model.sample(call("tc", 90), rng) for _ in range(2000)]
    assert min(samples) >= low
    assert sum(samples) / len(samples) == pytest.approx(mean, rel=0.05)


def test_sampling_is_reproducible_with_the_same_seed():
    model = ExecTimeModel.for_robot("arm")
    a = [model.sample(call("pk", "cup", robot="arm"), random.Random(1)) for _ in range(3)]
    b = [model.sample(call("pk", "cup", robot="arm"), random.Random(1)) for _ in range(3)]
    assert a == b


def test_unknown_skill_is_rejected():
    with pytest.raises(SkillValidationError):
        ExecTimeModel.for_robot("arm").estimate(BoundCall("fly", "fl", ()))


def test_refit_recovers_a_linear_model():
    model = ExecTimeModel.for_robot("drone")
    records = [
        ExecutionRecord(call("mf", d), 0.5 + d / 100 * (1 + noise))
        for d, noise in [(50, 0.01), (100, -0.01), (200, 0.0), (300, 0.02), (400, -0.02)]
    ]
    assert model.refit(records) == {"move_forward": 5}
    spec = model.skill_set.get("mf").exec_time
    assert isinstance(spec, LinearTime)
    assert spec.rate == pytest.approx(100, rel=0.05)
    assert spec.overhead_s == pytest.approx(0.5, abs=0.1)
    assert model.estimate(call("mb", 100)) == ExecTimeModel.for_robot("drone").estimate(
        call("mb", 100)
    )


def test_refit_constant_and_empirical_models():
    model = ExecTimeModel.for_robot("drone")
    model.refit([ExecutionRecord(call("tp"), 1.0), ExecutionRecord(call("tp"), 1.2)])
    spec = model.skill_set.get("tp").exec_time
    assert isinstance(spec, ConstantTime)
    assert spec.mean_s == pytest.approx(1.1)
    before = len(SkillSet.load("drone").get("sw").exec_time.samples_s)  # type: ignore[union-attr]
    model.refit([ExecutionRecord(call("sw", "cat"), 20.0)])
    _low, mean = model.estimate(call("sw", "cat"))
    assert len(model.skill_set.get("sw").exec_time.samples_s) == before + 1  # type: ignore[union-attr]
    assert mean > ExecTimeModel.for_robot("drone").estimate(call("sw", "cat"))[1]


def test_refit_rejects_negative_durations():
    with pytest.raises(ValueError, match="duration_s"):
        ExecTimeModel.for_robot("drone").refit([ExecutionRecord(call("tp"), -1.0)])


def test_save_and_load_round_trip(tmp_path):
    model = ExecTimeModel.for_robot("drone")
    model.refit([ExecutionRecord(call("tk"), 6.0), ExecutionRecord(call("tk"), 6.4)])
    path = tmp_path / "drone.yaml"
    model.save(path)
    loaded = ExecTimeModel.load(path)
    for probe in (call("tk"), call("mf", 120), call("sw", "cat")):
        assert loaded.estimate(probe) == pytest.approx(model.estimate(probe))
    assert loaded.skill_set == model.skill_set


def test_statement_estimates_for_conditionals_and_loops():
    language = load_language("drone")
    model = language.exec_time
    sweep = model.estimate(call("sw", "cat"))
    (conditional,) = language.parse("?sw('cat')==True{tp();}")
    low, mean = language.estimate_execution_s([conditional])
    assert low == pytest.approx(sweep[0])  # the block may not run
    assert mean == pytest.approx(sweep[1] + 0.5 * model.estimate(call("tp"))[1])
    (square,) = language.parse("4{mf(100);tc(90);}")
    side_low = model.estimate(call("mf", 100))[0] + model.estimate(call("tc", 90))[0]
    assert language.estimate_execution_s([square])[0] == pytest.approx(4 * side_low)
    (scan,) = language.parse("8{?iv('cat')==True{->True;}tc(45);}")
    assert language.estimate_execution_s([scan])[0] < 2 * model.estimate(call("tc", 45))[1]


def test_variable_argument_uses_the_range():
    model = ExecTimeModel.for_robot("drone")
    language = load_language("drone")
    statements = language.parse("_1=ox('cat');lg(_1);")
    low, mean = language.estimate_execution_s(statements)
    assert 0 < low <= mean
    spec = SkillSet.load("drone").get("mf").exec_time
    (moves,) = [s.calls[0] for s in language.parse("mf(20);")]
    assert model.estimate(moves)[1] == pytest.approx(spec.overhead_s + 20 / spec.rate)  # type: ignore[union-attr]
