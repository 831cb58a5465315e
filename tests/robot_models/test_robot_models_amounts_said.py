"""Reading the amounts a request states (amounts_said.py): units, number words,
fractions, vague amounts, turning phrases, lists that share a unit, the order said,
and numbers that are counts or labels, not amounts. Every amount the data
generator writes reads back as its value."""

from __future__ import annotations

import random

import pytest

from robot_models.amounts_said import SaidAmount, amounts_said
from robot_models.dataset import amounts


def read(text: str) -> list[tuple[str, float]]:
    return [(a.kind, round(a.value, 2)) for a in amounts_said(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("climb 2 m", [("length", 200.0)]),
        ("climb 2m", [("length", 200.0)]),
        ("descend 35 centimeters", [("length", 35.0)]),
        ("slide left 120mm", [("length", 12.0)]),
        ("ascend three feet", [("length", 91.44)]),
        ("move 6 in", [("length", 15.24)]),
        ("forward a yard", [("length", 91.44)]),
        ("go back a metre and a half", [("length", 150.0)]),
        ("go back one and a half metres", [("length", 150.0)]),
        ("go back two and a half metres", [("length", 250.0)]),
        ("rise half a meter", [("length", 50.0)]),
        ("up a couple of feet", [("length", 60.96)]),
        ("yaw 30°", [("angle", 30.0)]),
        ("rotate seventy five degrees", [("angle", 75.0)]),
        ("turn three quarters of a turn", [("angle", 270.0)]),
        ("spin around", [("angle", 180.0)]),
        ("make a full circle", [("angle", 360.0)]),
        ("pause for 2.5 s", [("duration", 2.5)]),
        ("hold on a moment", [("duration", float(amounts.VAGUE_SECONDS))]),
        ("linger two minutes", [("duration", 120.0)]),
        ("drift a tad to the left", [("length", float(amounts.VAGUE_CM))]),
        ("fly 1,5 m forward", [("length", 150.0)]),  # a decimal comma
        ("drop 1/2 m", [("length", 50.0)]),
        ("fly forward 2 1/2 m", [("length", 250.0)]),
        ("turn two-thirds of a turn", [("angle", 240.0)]),
        ("rotate 90º", [("angle", 90.0)]),
        ("go up 1 m 20", [("length", 120.0)]),
        ("rise 2 metres 30 cm", [("length", 230.0)]),
        ("go up a hundred and twenty centimetres", [("length", 120.0)]),
        ("climb one metre fifty", [("length", 150.0)]),
        ("do a 90-degree turn to the right", [("angle", 90.0)]),
        ("a 2-metre climb", [("length", 200.0)]),
        ("a foot and a half lower", [("length", 45.72)]),
    ],
)
def test_amounts_with_units_and_words_read_in_the_skills_units(
    text: str, expected: list[tuple[str, float]]
) -> None:
    assert read(text) == expected


def test_a_list_takes_the_unit_said_after_it_and_the_order_is_kept() -> None:
    assert read("place it at 40, -15, 20 cm") == [
        ("length", 40.0),
        ("length", -15.0),
        ("length", 20.0),
    ]
    assert read("target (35, 5, 10) cm") == [("length", 35.0), ("length", 5.0), ("length", 10.0)]
    # units and bare numbers as they come in the sentence
    assert read("reach x 30cm y 0 z 45cm") == [("length", 30.0), ("bare", 0.0), ("length", 45.0)]
    assert read("coordinates six hundred, minus two hundred, fifty") == [
        ("bare", 600.0),
        ("bare", -200.0),
        ("bare", 50.0),
    ]


def test_a_coordinate_letter_before_an_amount_is_its_label() -> None:
    labels = [(a.label, a.value) for a in amounts_said("x=0.5m, y: -20 cm, z 30 and 40")]
    assert labels == [("x", 50.0), ("y", -20.0), ("z", 30.0), ("", 40.0)]


def test_a_bare_number_is_an_amount_only_where_no_noun_follows() -> None:
    assert read("up 80 then left 40") == [("bare", 80.0), ("bare", 40.0)]
    assert read("up 80 turn right") == [("bare", 80.0)]
    assert read("bring the 9 volt battery") == []  # a label
    assert read("pick 3 cups") == []  # a count
    assert read("sort the m4 bolts") == []  # part of a name
    assert read("put 3 in the box") == []  # "in" the preposition, not inches
    assert read("pick one up") == []  # "one" only counts when written as a digit
    assert read("go to 1") == [("bare", 1.0)]
    assert read("move to (6,3,5)") == [("bare", 6.0), ("bare", 3.0), ("bare", 5.0)]
    assert read("go 2 m 5 times") == [("length", 200.0)]


def test_an_adjective_is_not_a_vague_amount() -> None:
    assert read("watch the little dog") == []
    assert read("a little closer") == [("length", float(amounts.VAGUE_CM))]


def test_absurd_input_reads_nothing_absurd() -> None:
    assert amounts_said("go up " + "9" * 400 + " cm") == []  # not a float
    for text in ("9" * 2000, "1," * 1000, "1 m " * 500, "one " * 500):  # the request limit
        assert all(abs(a.value) <= 1e9 for a in amounts_said(text))


def test_nothing_to_read_gives_nothing() -> None:
    assert amounts_said("") == []
    assert amounts_said("take a picture of the red barn") == []
    assert amounts_said("wait a second") == [SaidAmount("duration", 1.0)]


@pytest.mark.parametrize(
    ("draw", "kind", "before"),
    [
        (amounts.distance, "length", "fly up "),
        (amounts.angle, "angle", "turn "),
        (amounts.duration, "duration", "wait "),
    ],
)
def test_every_amount_the_generator_writes_reads_back(draw: object, kind: str, before: str) -> None:
    rng = random.Random(7)
    for _ in range(600):
        amount = draw(rng)  # type: ignore[operator]
        said = amounts_said(before + amount.text)
        assert any(a.kind in (kind, "bare") and abs(a.value - amount.value) < 1e-6 for a in said), (
            amount,
            said,
        )
