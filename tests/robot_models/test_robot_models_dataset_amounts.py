# mypy: disable-error-code="no-untyped-def"
"""The amounts module against a small parser written here, independently of it."""

import math
import random
import re
from collections import Counter

import pytest

from robot_models.dataset.amounts import (
    Amount,
    angle,
    angle_degrees,
    arm_position,
    distance,
    drone_moves,
    duration,
    number_words,
)

DRAWS = 20_000

# --- an independent reader of what the module writes -------------------------------

_SMALL = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
}
_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}


def read_number(text: str) -> float:
    """Digits ("1.5", ".5") or English words ("a hundred and five", "two and a half")."""
    text = text.strip()
    if re.fullmatch(r"-?(\d+\.?\d*|\.\d+)", text):
        return float(text)
    fixed = {"half a": 0.5, "a": 1, "a couple of": 2, "a couple": 2, "a dozen": 12}
    if text in fixed:
        return fixed[text]
    half = 0.0
    if text.endswith(" and a half"):
        text, half = text[: -len(" and a half")], 0.5
    total = 0
    for word in text.replace("-", " ").split():
        if word == "and":
            continue
        if word == "a":
            total += 1
        elif word in _SMALL:
            total += _SMALL[word]
        elif word in _TENS:
            total += _TENS[word]
        elif word == "hundred":
            total *= 100
        elif word == "thousand":
            total *= 1000
        else:
            raise ValueError(f"not a number word: {word!r} in {text!r}")
    return total + half


_CM = {
    "m": 100,
    "metre": 100,
    "metres": 100,
    "meter": 100,
    "meters": 100,
    "cm": 1,
    "centimetre": 1,
    "centimetres": 1,
    "centimeter": 1,
    "centimeters": 1,
    "mm": 0.1,
    "millimetre": 0.1,
    "millimetres": 0.1,
    "millimeter": 0.1,
    "millimeters": 0.1,
    "ft": 30.48,
    "foot": 30.48,
    "feet": 30.48,
    "in": 2.54,
    "inch": 2.54,
    "inches": 2.54,
}
_VAGUE = {
    "a bit",
    "a little",
    "slightly",
    "a tad",
    "a touch",
    "a little bit",
    "just a bit",
    "a tiny bit",
}


def _number_then_unit(text: str, units: dict[str, float]) -> float:
    alternatives = "|".join(sorted(map(re.escape, units), key=len, reverse=True))
    m = re.fullmatch(rf"(.+?)\s*({alternatives})", text)
    if m is None:
        raise ValueError(f"no number and unit in {text!r}")
    return read_number(m.group(1)) * units[m.group(2)]


def read_distance_cm(text: str) -> float:
    if text in _VAGUE:
        return 30.0
    m = re.fullmatch(r"a (\w+) and a half", text)  # "a metre and a half"
    if m:
        return 1.5 * _CM[m.group(1)]
    return _number_then_unit(text, _CM)


_TURNS = {
    "a quarter turn": 90,
    "a quarter of a turn": 90,
    "a right angle": 90,
    "half a turn": 180,
    "a half turn": 180,
    "around": 180,
    "right around": 180,
    "half a circle": 180,
    "a third of a circle": 120,
    "a third of a turn": 120,
    "three quarters of a turn": 270,
    "an eighth of a turn": 45,
    "a sixth of a turn": 60,
    "all the way round": 360,
    "all the way around": 360,
    "a full turn": 360,
    "a full circle": 360,
    "a whole turn": 360,
    "two full turns": 720,
}


def read_angle(text: str) -> float:
    if text in _TURNS:
        return _TURNS[text]
    return _number_then_unit(text, {"degrees": 1, "degree": 1, "°": 1, "deg": 1})


_WAITS = {
    "a second": 1,
    "a sec": 1,
    "half a second": 0.5,
    "half a minute": 30,
    "a quarter of a minute": 15,
    "a couple of seconds": 2,
    "a couple of secs": 2,
    "a few seconds": 3,
    "a moment": 3,
}


def read_seconds(text: str) -> float:
    if text in _WAITS:
        return _WAITS[text]
    return _number_then_unit(text, {"seconds": 1, "second": 1, "secs": 1, "sec": 1, "s": 1})


def read_position(text: str) -> tuple[int, int, int]:
    numbers = [
        float(n.replace("minus ", "-"))
        for n in re.findall(r"(?:minus |-)?\d+\.?\d*", text.replace("x=", "x ").replace("=", " "))
    ]
    assert len(numbers) == 3, text
    scale = 1000 if re.search(r"\dm\b|\d m\b", text) else 10 if "cm" in text else 1
    x, y, z = (round(n * scale) for n in numbers)
    return x, y, z


def draws(fn, n=DRAWS, seed=7):
    rng = random.Random(seed)
    return [fn(rng) for _ in range(n)]


# --- conversions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "zero"),
        (7, "seven"),
        (13, "thirteen"),
        (40, "forty"),
        (45, "forty-five"),
        (100, "one hundred"),
        (150, "one hundred and fifty"),
        (305, "three hundred and five"),
        (999, "nine hundred and ninety-nine"),
        (1000, "one thousand"),
    ],
)
def test_number_words(n, words):
    assert number_words(n) == words
    assert read_number(words) == n


def test_number_words_rejects_what_it_does_not_cover():
    with pytest.raises(ValueError, match=r"0\.\.1000"):
        number_words(1001)
    with pytest.raises(ValueError, match=r"0\.\.1000"):
        number_words(-1)


DISTANCE_CASES = {
    "1.5 m": 150,
    "2m": 200,
    "0.3 meters": 30,
    ".5 m": 50,
    "4.9 metres": 490,
    "90 cm": 90,
    "90cm": 90,
    "37 centimetres": 37,
    "150 mm": 15,
    "800 millimeters": 80,
    "3 ft": 91.44,
    "two feet": 60.96,
    "a foot": 30.48,
    "a couple of feet": 60.96,
    "18 inches": 45.72,
    "12in": 30.48,
    "half a metre": 50,
    "a metre and a half": 150,
    "two and a half meters": 250,
    "three metres": 300,
    "thirty centimetres": 30,
    "a hundred and fifty centimeters": 150,
    "a bit": 30,
    "a little": 30,
    "slightly": 30,
    "a tad": 30,
    "a touch": 30,
    "8 m": 800,
    "10 cm": 10,
}


def _by_text(amounts: list[Amount]) -> dict[str, set[float]]:
    seen: dict[str, set[float]] = {}
    for a in amounts:
        seen.setdefault(a.text, set()).add(a.value)
    return seen


def test_distance_conversions_are_exact_for_hand_written_cases():
    seen = _by_text(draws(distance, 60_000))
    for text, cm in DISTANCE_CASES.items():
        assert text in seen, f"{text!r} never drawn"
        assert seen[text] == {cm}, text


def test_angle_and_duration_conversions_for_hand_written_cases():
    angles = _by_text(draws(angle))
    for text, deg in {
        "90 degrees": 90,
        "90°": 90,
        "45 deg": 45,
        "a quarter turn": 90,
        "half a turn": 180,
        "around": 180,
        "all the way round": 360,
        "a third of a circle": 120,
        "ninety degrees": 90,
        "forty-five degrees": 45,
        "22.5°": 22.5,
    }.items():
        assert angles.get(text) == {deg}, text
    waits = _by_text(draws(duration))
    for text, s in {
        "3 seconds": 3,
        "two secs": 2,
        "a second": 1,
        "half a minute": 30,
        "1.5 s": 1.5,
        "3s": 3,
        "one and a half seconds": 1.5,
        "a few seconds": 3,
    }.items():
        assert waits.get(text) == {s}, text


@pytest.mark.parametrize(
    ("fn", "reader"), [(distance, read_distance_cm), (angle, read_angle), (duration, read_seconds)]
)
def test_every_draw_reads_back_to_its_value(fn, reader):
    for a in draws(fn):
        assert reader(a.text) == pytest.approx(a.value, abs=1e-6), a


def test_every_arm_position_reads_back_to_its_millimetres():
    for text, xyz in draws(arm_position):
        assert all(isinstance(v, int) for v in xyz)
        assert read_position(text) == xyz, text


# --- distributions ------------------------------------------------------------------


def distance_form(text: str) -> str:
    if text in _VAGUE:
        return "vague"
    if re.search(r"\b(ft|foot|feet|in|inch|inches)$|\d(ft|in)$", text):
        return "imperial"
    if not re.search(r"\d", text):
        return "words"
    if re.search(r"(cm|mm|centimet\w+|millimet\w+)$", text):
        return "cm"
    return "m"


def test_distance_forms_are_all_common_and_some_fall_outside_the_move_range():
    amounts = draws(distance)
    shares = Counter(distance_form(a.text) for a in amounts)
    low = {"cm": 0.25, "m": 0.22, "words": 0.12, "imperial": 0.08, "vague": 0.07}
    for form, least in low.items():
        assert shares[form] / len(amounts) > least, (form, shares)
    outside = sum(not 20 <= a.value <= 500 for a in amounts) / len(amounts)
    assert 0.02 < outside < 0.15
    assert any(a.value < 20 for a in amounts) and any(a.value > 500 for a in amounts)
    values = [a.value for a in amounts]
    assert any(v % 2 == 1 for v in values), "odd whole numbers"
    assert any(v % 10 == 0 for v in values), "round numbers"
    assert any(v != int(v) for v in values), "fractions (feet, inches)"
    texts = {a.text for a in amounts}
    assert any(re.fullmatch(r"\d+(cm|m|mm|ft|in)", t) for t in texts), "no space"
    assert any(re.fullmatch(r"\d+ (cm|m|mm|ft|in)", t) for t in texts), "with space"
    assert any(t.startswith(".") for t in texts)


def test_angle_and_duration_forms_are_all_common():
    angles = draws(angle)
    forms = Counter(
        "phrase" if a.text in _TURNS else "numeral" if re.match(r"\d", a.text) else "words"
        for a in angles
    )
    assert min(forms.values()) / len(angles) > 0.15 and len(forms) == 3, forms
    assert 0 < sum(not 1 <= a.value <= 360 for a in angles) / len(angles) < 0.05
    waits = draws(duration)
    assert all(0.1 <= a.value <= 30 for a in waits)
    assert not any(re.search(r"[a-z] s$", a.text) for a in waits), "a number word then 's'"
    forms = Counter(
        "phrase" if a.text in _WAITS else "numeral" if re.match(r"[\d.]", a.text) else "words"
        for a in waits
    )
    assert min(forms.values()) / len(waits) > 0.15 and len(forms) == 3, forms


def test_arm_positions_are_mostly_inside_the_workspace_in_every_written_form():
    positions = draws(arm_position)
    inside = sum(
        150 <= x <= 750 and -500 <= y <= 500 and 0 <= z <= 600 for _, (x, y, z) in positions
    )
    assert 0.85 < inside / len(positions) < 0.99
    texts = [t for t, _ in positions]
    for marker in ("x=", "m y=", " cm, ", ") mm", ") cm", " mm, ", "minus ", "y -"):
        assert any(marker in t for t in texts), marker


def test_draws_depend_only_on_the_seed():
    for fn in (distance, angle, duration, arm_position):
        assert draws(fn, 500, seed=3) == draws(fn, 500, seed=3)
        assert draws(fn, 500, seed=3) != draws(fn, 500, seed=4)


# --- policies -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cm", "moves"),
    [
        (0, [20]),
        (5, [20]),
        (19.5, [20]),
        (20, [20]),
        (20.5, [21]),
        (137.4, [137]),
        (500, [500]),
        (500.4, [500]),
        (501, [481, 20]),
        (520, [500, 20]),
        (800, [500, 300]),
        (1000, [500, 500]),
        (510, [490, 20]),
        (1005, [500, 485, 20]),
    ],
)
def test_drone_moves_policy(cm, moves):
    assert drone_moves(cm) == moves


def test_drone_moves_keep_every_move_in_range_and_the_total():
    for cm in [*range(0, 2001), *(a.value for a in draws(distance, 5000))]:
        moves = drone_moves(cm)
        assert all(20 <= m <= 500 for m in moves), (cm, moves)
        if cm >= 20:
            assert sum(moves) == math.floor(cm + 0.5), (cm, moves)


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf])
def test_drone_moves_rejects_what_is_not_a_distance(bad):
    with pytest.raises(ValueError, match="drone distance"):
        drone_moves(bad)


@pytest.mark.parametrize(
    ("deg", "out"),
    [(90, 90), (22.5, 23), (359.6, 360), (0.5, 1), (0, 1), (-10, 1), (400, 360), (720, 360)],
)
def test_angle_degrees_policy(deg, out):
    assert angle_degrees(deg) == out


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_angle_degrees_rejects_what_is_not_an_angle(bad):
    with pytest.raises(ValueError, match="angle"):
        angle_degrees(bad)
