# mypy: disable-error-code="no-untyped-def"
import pytest

from robot_models.errors import SkillValidationError
from robot_models.skills import ROBOT_TYPES, SkillSet


@pytest.mark.parametrize("robot_type", ROBOT_TYPES)
def test_packaged_skill_sets_load_with_their_robot_type(robot_type):
    skills = SkillSet.load(robot_type)
    assert skills.robot_type == robot_type
    assert len(skills.skills) >= 8


def test_skills_are_found_by_short_form_and_full_name():
    drone = SkillSet.load("drone")
    assert drone.get("mf").name == "move_forward"
    assert drone.get("move_forward").short == "mf"


def test_drone_has_the_skills_of_the_issue():
    names = {s.name for s in SkillSet.load("drone").skills}
    expected = {
        "move_forward",
        "move_backward",
        "move_left",
        "move_right",
        "move_up",
        "move_down",
        "turn_cw",
        "turn_ccw",
        "takeoff",
        "land",
        "delay",
        "is_visible",
        "object_x",
        "object_y",
        "object_width",
        "object_height",
        "take_picture",
        "log",
        "sweep",
        "orient",
        "approach",
    }
    assert expected <= names


def test_arm_has_the_skills_of_the_issue():
    names = {s.name for s in SkillSet.load("arm").skills}
    assert {
        "move_to",
        "pick",
        "place",
        "open_gripper",
        "close_gripper",
        "look_for",
        "home",
        "stack",
        "sort",
    } <= names


def test_out_of_range_argument_names_skill_argument_and_range():
    with pytest.raises(SkillValidationError) as info:
        SkillSet.load("drone").validate_call("mf", [600])
    error = info.value
    assert (error.skill, error.argument) == ("move_forward", "distance")
    assert "[20, 500]" in error.allowed
    assert "move_forward" in str(error) and "distance" in str(error) and "[20, 500]" in str(error)


def test_wrong_type_is_rejected_with_the_allowed_type():
    with pytest.raises(SkillValidationError, match=r"'x'.*int in \[1, 360\]"):
        SkillSet.load("drone").validate_call("tc", ["x"])
    with pytest.raises(SkillValidationError, match="int"):
        SkillSet.load("drone").validate_call("tc", [True])


def test_unknown_skill_lists_the_robots_skills():
    with pytest.raises(SkillValidationError) as info:
        SkillSet.load("arm").validate_call("mf", [100])
    assert info.value.skill == "mf"
    assert "pk" in info.value.allowed and "hm" in info.value.allowed


def test_wrong_argument_count_shows_the_signature():
    with pytest.raises(SkillValidationError, match=r"mt\(x:int, y:int, z:int\)"):
        SkillSet.load("arm").validate_call("mt", [300, 0])


def test_valid_call_returns_the_skill():
    assert SkillSet.load("arm").validate_call("mt", [300, -120, 250]).name == "move_to"
    assert SkillSet.load("drone").validate_call("dl", [2.5]).name == "delay"


def test_unknown_robot_type_lists_known_types():
    with pytest.raises(ValueError, match="known types: drone, arm"):
        SkillSet.load("boat")


def test_load_returns_an_independent_copy():
    first = SkillSet.load("drone")
    first.skills.clear()
    assert SkillSet.load("drone").skills


def test_invalid_file_is_rejected_naming_the_problem(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "robot_type: x\nskills:\n  - {name: a, short: a, description: d, "
        "exec_time: {kind: linear, arg: nope, overhead_s: 1, rate: 1, noise_cv: 0}}\n"
    )
    with pytest.raises(ValueError, match=r"exec_time\.arg 'nope'"):
        SkillSet.load_file(path)


def test_the_arm_never_names_a_held_or_stacked_object_as_its_own_target():
    pairs = SkillSet.load("arm").distinct_names()
    # place's target after pick's object, in every spelling; stack's and sort's
    # second argument after their first
    for after in ("pk(", "pick("):
        for opener in ("pl(", "place("):
            assert (after, opener) in pairs
    for after in ("st(", "stack(", "so(", "sort("):
        assert (after, ",") in pairs
    assert len(pairs) == 8
    assert SkillSet.load("drone").distinct_names() == ()


SKILL = "  - {{name: {name}, short: {short}, description: d, args: [{args}], {time}}}\n"
TIME = "exec_time: {kind: constant, mean_s: 1.0, noise_cv: 0.1}"


def _skills(tmp_path, *skills: tuple[str, str, str]) -> SkillSet:
    path = tmp_path / "skills.yaml"
    lines = "".join(SKILL.format(name=n, short=s, args=a, time=TIME) for n, s, a in skills)
    path.write_text(f"robot_type: x\nskills:\n{lines}")
    return SkillSet.load_file(path)


@pytest.mark.parametrize(
    ("skills", "problem"),
    [
        (
            [("put", "pu", "{name: at, type: str, distinct_from: grab.thing}")],
            "unknown skill 'grab'",
        ),
        (
            [
                ("grab", "gr", "{name: thing, type: str}"),
                ("put", "pu", "{name: at, type: str, distinct_from: grab.other}"),
            ],
            "must be a skill's first argument",
        ),
        (
            [
                ("grab", "gr", "{name: thing, type: int}"),
                ("put", "pu", "{name: at, type: str, distinct_from: grab.thing}"),
            ],
            "must be a str argument",
        ),
        (
            [
                ("grab", "gr", "{name: thing, type: str}"),
                (
                    "put",
                    "pu",
                    "{name: a, type: str}, {name: at, type: str, distinct_from: grab.thing}",
                ),
            ],
            "needs the first argument",
        ),
        (
            [
                (
                    "stk",
                    "sk",
                    "{name: a, type: str}, {name: b, type: str}, "
                    "{name: c, type: str, distinct_from: a}",
                )
            ],
            "needs the second argument",
        ),
        ([("stk", "sk", "{name: a, type: int, distinct_from: a}")], "distinct_from needs type str"),
    ],
)
def test_a_distinct_from_that_cannot_hold_is_refused_naming_it(tmp_path, skills, problem):
    with pytest.raises(ValueError, match=problem):
        _skills(tmp_path, *skills)


def test_distinct_from_gives_its_pairs_for_both_spellings(tmp_path):
    skills = _skills(
        tmp_path,
        ("grab", "gr", "{name: thing, type: str}"),
        ("put", "pu", "{name: at, type: str, distinct_from: grab.thing}"),
        ("stk", "sk", "{name: a, type: str}, {name: b, type: str, distinct_from: a}"),
    )
    assert skills.distinct_names() == (
        ("gr(", "pu("),
        ("gr(", "put("),
        ("grab(", "pu("),
        ("grab(", "put("),
        ("sk(", ","),
        ("stk(", ","),
    )
