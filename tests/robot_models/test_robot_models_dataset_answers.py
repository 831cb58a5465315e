"""Training examples of plans shown a perception tool's answers
(`dataset/answers.py`): where the answers go, how they read, and the training
option that adds them."""

from __future__ import annotations

import random
import re

import pytest

from robot_models.dataset import Example, build_dataset
from robot_models.dataset.answers import answer_examples, asks, with_answers
from robot_models.dataset.observations import with_failure
from robot_models.language import load_language
from robot_models.skills import SkillSet
from robot_models.training.loop import TrainConfig, training_data

# one answer as the service appends it: "\n" + what the perception tool writes + "\n"
ANSWER = re.compile(r"\n([a-z]+)\('([^']*)'\)->(True|False|[01]\.\d\d)\n")


def test_answers_follow_each_statement_that_asks_and_the_plan_goes_on_unchanged() -> None:
    desk = next(e for e in build_dataset().lrtrace if e.instruction == "Clean the desk")
    answered = with_answers(desk, random.Random(1))
    assert answered is not None and answered.family == f"{desk.family}+answers"
    pieces = answered.pieces()
    written = "".join(text for text, observed in pieces if not observed)
    assert written == desk.plan  # the plan is the same whatever the answers
    observations = [text for text, observed in pieces if observed]
    asked = re.findall(r"lk\('([^']*)'\)", desk.plan)
    assert len(observations) == len(asked) == 6  # one per statement that asks
    for observation, name in zip(observations, asked, strict=True):
        [(short, obj, value)] = ANSWER.findall(observation)
        assert (short, obj) == ("lk", name) and value in ("True", "False")
    # each answer comes right after the statement that asked it
    statements = load_language("arm").parse(desk.plan)
    ends = [s.end for s in statements if "lk(" in s.text]
    starts = [start for start, _ in answered.observed]
    assert [written_len(answered, start) for start in starts] == ends


def written_len(example: Example, position: int) -> int:
    """How many plan characters precede `position` of the answered plan."""
    return position - sum(
        min(end, position) - start for start, end in example.observed if start < position
    )


def test_several_answers_of_one_statement_come_in_call_order() -> None:
    example = Example(
        "drone",
        "",
        "Is there a pillow under the table?",
        "?sw('table')==True{a('table');md(50);?iv('pillow')==True{tp();}mu(50);}_1=ox('cup');lg(_1);",
        "find_under",
    )
    answered = with_answers(example, random.Random(0))
    assert answered is not None
    first, second = (answered.plan[s:e] for s, e in answered.observed)
    assert [m[:2] for m in ANSWER.findall(first)] == [("sw", "table"), ("iv", "pillow")]
    [(short, obj, value)] = ANSWER.findall(second)
    assert (short, obj) == ("ox", "cup") and re.fullmatch(r"[01]\.\d\d", value)
    assert answered.plan.endswith("\nlg(_1);")


def test_only_perception_skills_on_a_named_object_are_answered() -> None:
    perception = {s.short for t in ("drone", "arm") for s in SkillSet.load(t).perception()}
    assert {"sw", "iv", "ox", "lk"} <= perception and not {"tp", "pk", "mf"} & perception
    never = [
        Example("drone", "", "back off", "mb(80);", "urgent"),
        Example("arm", "", "tidy", "hm();pk('cup');pl('tray');hm();", "pick_place"),
    ]
    for example in never:
        assert not asks(example) and with_answers(example, random.Random(0)) is None
    failed = with_failure(
        Example("arm", "", "fetch", "hm();?lk('cup')==True{pk('cup');}", "x"), random.Random(0)
    )
    assert failed is not None and with_answers(failed, random.Random(0)) is None  # one kind each


def test_answers_are_not_always_the_same() -> None:
    data = build_dataset()
    answered = answer_examples(list(data.train[:400]), 1.0, random.Random(2))
    values = {v for e in answered for s, t in e.observed for *_, v in ANSWER.findall(e.plan[s:t])}
    assert {"True", "False", "0.00"} <= values and len(values) > 10


def test_the_training_option_adds_answered_variants_and_the_lrtrace_tasks_answered() -> None:
    with pytest.raises(ValueError, match=r"answers: must be a fraction"):
        TrainConfig(answers=-0.1)
    base = training_data(TrainConfig(examples=40))
    more = training_data(TrainConfig(examples=40, answers=0.5))
    assert more.heldout == base.heldout and more.train[: len(base.train)] == base.train
    extra = more.train[len(base.train) :]
    assert extra and all(e.family.endswith("+answers") and e.observed for e in extra)
    lrtrace_asking = [e for e in base.lrtrace if asks(e)]
    assert 0 < len(lrtrace_asking) < len(base.lrtrace)  # the urgent moves ask nothing
    answered_lrtrace = {e.instruction for e in extra} & {e.instruction for e in lrtrace_asking}
    assert answered_lrtrace == {e.instruction for e in lrtrace_asking}
