# mypy: disable-error-code="no-untyped-def"
from collections import Counter

import pytest

from robot_models.dataset import LRTRACE_TASKS, build_dataset, lrtrace_task
from robot_models.language import load_language


def test_eleven_lrtrace_tasks_with_the_categories_of_table_2():
    assert [t.trace_id for t in LRTRACE_TASKS] == list(range(1, 12))
    assert {t.trace_id for t in LRTRACE_TASKS if t.robot_type == "drone"} == set(range(1, 9))
    assert {t.trace_id for t in LRTRACE_TASKS if t.urgency == "urgent"} == {6, 7, 8}
    assert lrtrace_task(1).instruction == "Look for the cat"
    assert lrtrace_task(11).robot_type == "arm"
    with pytest.raises(ValueError, match=r"1\.\.11"):
        lrtrace_task(12)


@pytest.mark.parametrize("task", LRTRACE_TASKS, ids=lambda t: str(t.trace_id))
def test_golden_plans_are_valid_plans_of_their_robot(task):
    statements = load_language(task.robot_type).parse(task.golden_plan)
    assert "".join(s.text for s in statements) == task.golden_plan


def test_dataset_is_deterministic_split_and_large_enough():
    data = build_dataset()
    assert data == build_dataset()
    per_type = Counter(e.robot_type for e in (*data.train, *data.heldout))
    assert per_type["drone"] >= 300 and per_type["arm"] >= 300
    train_keys = {(e.scene, e.instruction) for e in data.train}
    assert not train_keys & {(e.scene, e.instruction) for e in data.heldout}
    assert not train_keys & {(t.scene, t.instruction) for t in LRTRACE_TASKS}
    assert {e.robot_type for e in data.heldout} == {"drone", "arm"}
    assert build_dataset(seed=1).train != data.train


def test_every_generated_plan_is_valid():
    data = build_dataset()
    for example in (*data.train, *data.heldout):
        assert load_language(example.robot_type).parse(example.plan), example


def test_urgent_drone_tasks_start_by_moving_away():
    data = build_dataset()
    urgent = [e for e in data.train if e.family.startswith("urgent")]
    assert len(urgent) >= 50
    assert all(e.plan[:2] in {"mb", "mf", "ml", "mr", "mu"} for e in urgent)


def test_extra_examples_are_new_and_leave_the_split_unchanged():
    data = build_dataset()
    more = build_dataset(extra_per_type=200)
    assert more.heldout == data.heldout and more.lrtrace == data.lrtrace
    assert more.train[: len(data.train)] == data.train
    extra = more.train[len(data.train) :]
    assert Counter(e.robot_type for e in extra) == {"drone": 200, "arm": 200}
    keys = [(e.scene, e.instruction) for e in more.train]
    assert len(set(keys)) == len(keys)
    assert not set(keys) & {(e.scene, e.instruction) for e in data.heldout}
