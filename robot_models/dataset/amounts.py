"""Amounts phrased the way operators say them, with the value in the skill's unit.

The data generator draws an `Amount` (the words it puts in the instruction and the
value the plan must carry) so the model learns the conversion, not our templates'
one way of writing numbers.

Policy (the prompt's guidance states the same):

- Drone distances are in cm: m/metre/meter = 100, cm, mm = 0.1, ft/foot/feet =
  30.48, in/inch/inches = 2.54. Vague amounts ("a bit", "a little", "slightly",
  "a tad", "a touch", ...) are `VAGUE_CM` = 30 cm; there is no other reading.
- `drone_moves` turns a distance into the moves a plan makes: rounded to the
  nearest cm (halves up); below 20 cm one move of 20 (the smallest the drone can
  make); 20..500 one exact move; above 500 moves of 500 and then the rest, with
  the last two rebalanced so none is below 20 (510 -> [490, 20]); the sum is the
  distance asked for.
- Turns are in degrees; `angle_degrees` rounds (halves up) and clamps into
  1..360, so "two full turns" is one full turn. Turn phrases read after a verb of
  turning ("turn {text}"): "a quarter turn" 90, "half a turn"/"around" 180,
  "a third of a circle" 120, "all the way round" 360.
- Durations are in seconds and stay inside the delay skill's 0.1..30 s:
  "half a minute" 30, "half a second" 0.5, "a few seconds"/"a moment" are
  `VAGUE_SECONDS` = 3.
- Arm positions are in mm (ints); the text may give m, cm or mm, "minus" or "-"
  for negatives; most draws are inside the workspace (x 150..750, y -500..500,
  z 0..600), a few outside so the limit check's refusal gets examples.

Every draw depends only on the `random.Random` passed in.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

VAGUE_CM = 30
"""What "a bit", "a little", "slightly", ... mean for a drone move, in cm."""

VAGUE_SECONDS = 3
"""What "a few seconds" and "a moment" mean for a delay, in seconds."""

VAGUE_DISTANCES = (
    "a bit",
    "a little",
    "slightly",
    "a tad",
    "a touch",
    "a little bit",
    "just a bit",
    "a tiny bit",
)

MOVE_MIN_CM = 20
MOVE_MAX_CM = 500
ANGLE_MIN_DEG = 1
ANGLE_MAX_DEG = 360
ARM_WORKSPACE_MM = ((150, 750), (-500, 500), (0, 600))

CM_PER_UNIT = {"m": 100.0, "cm": 1.0, "mm": 0.1, "ft": 30.48, "in": 2.54}

# Spellings per unit: (singular, plural) for words; abbreviations serve both.
_UNIT_WORDS: dict[str, tuple[tuple[str, str], ...]] = {
    "m": (("metre", "metres"), ("meter", "meters")),
    "cm": (("centimetre", "centimetres"), ("centimeter", "centimeters")),
    "mm": (("millimetre", "millimetres"), ("millimeter", "millimeters")),
    "ft": (("foot", "feet"),),
    "in": (("inch", "inches"),),
}

_ONES = (
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
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


@dataclass(frozen=True)
class Amount:
    """An amount as the operator said it and its value in the skill's unit."""

    text: str
    value: float


def plan_number(value: float) -> str:
    """A number as plans write it: whole numbers without a point, others with one
    decimal at most ("30", "0.5", "10.5")."""
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}".rstrip("0").rstrip(".")


def number_words(n: int) -> str:
    """English words for 0..1000 ("forty-five", "one hundred and twenty")."""
    if not 0 <= n <= 1000:
        raise ValueError(f"number_words covers 0..1000, got {n}")
    if n == 1000:
        return "one thousand"
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    hundreds, rest = divmod(n, 100)
    head = f"{_ONES[hundreds]} hundred"
    return head if rest == 0 else f"{head} and {number_words(rest)}"


def _numeral(rng: random.Random, v: float) -> str:
    """A number as digits: "3", "1.5", and sometimes ".5" for a fraction below one."""
    text = f"{v:g}"
    if 0 < v < 1 and rng.random() < 0.3:
        return text[1:]
    return text


def _unit(rng: random.Random, unit: str, count: float, abbreviate: float) -> str:
    """The unit's spelling: an abbreviation with probability `abbreviate`, else a word."""
    if rng.random() < abbreviate:
        return unit
    singular, plural = rng.choice(_UNIT_WORDS[unit])
    return singular if count == 1 else plural


def _with_unit(rng: random.Random, number: str, unit: str, count: float, abbreviate: float) -> str:
    spelled = _unit(rng, unit, count, abbreviate)
    glue = "" if spelled == unit and rng.random() < 0.35 else " "
    return f"{number}{glue}{spelled}"


def _cm(v: float) -> float:
    """Rounded to drop float noise (0.3 * 100 is 30.000000000000004)."""
    return round(v, 6)


def _weighted(
    rng: random.Random, forms: Sequence[tuple[float, Callable[[random.Random], Amount]]]
) -> Amount:
    draw = rng.random() * sum(w for w, _ in forms)
    for weight, form in forms:
        draw -= weight
        if draw < 0:
            return form(rng)
    return forms[-1][1](rng)


# --- distances --------------------------------------------------------------------


def _distance_cm(rng: random.Random) -> Amount:
    r = rng.random()
    if r < 0.55:
        v = rng.randrange(20, 501, 10)
    elif r < 0.9:
        v = rng.randint(20, 500)
    elif r < 0.95:
        v = rng.choice((5, 8, 10, 12, 15))
    else:
        v = rng.randrange(550, 1001, 50)
    return Amount(_with_unit(rng, str(v), "cm", v, abbreviate=0.6), float(v))


def _distance_mm(rng: random.Random) -> Amount:
    r = rng.random()
    v = rng.randrange(200, 2001, 50) if r < 0.85 else rng.choice((50, 100, 150))
    return Amount(_with_unit(rng, str(v), "mm", v, abbreviate=0.6), _cm(v * 0.1))


_METRES_IN_RANGE = (
    *(float(i) for i in range(1, 6)),
    *(i / 10 for i in range(2, 50) if i % 10),
    0.25,
    0.75,
    1.25,
    1.75,
    2.25,
)
_METRES_OUTSIDE = (0.1, 0.15, 5.5, 6.0, 7.0, 8.0, 10.0, 12.0)


def _distance_m(rng: random.Random) -> Amount:
    v = rng.choice(_METRES_IN_RANGE) if rng.random() < 0.9 else rng.choice(_METRES_OUTSIDE)
    return Amount(_with_unit(rng, _numeral(rng, v), "m", v, abbreviate=0.55), _cm(v * 100))


def _unit_word(rng: random.Random, unit: str, plural: bool) -> str:
    singular, many = rng.choice(_UNIT_WORDS[unit])
    return many if plural else singular


def _distance_words(rng: random.Random) -> Amount:
    r = rng.random()
    if r < 0.3:  # whole metres
        n = rng.randint(1, 5) if rng.random() < 0.9 else rng.choice((6, 8, 10))
        count = rng.choice(("a", "one")) if n == 1 else number_words(n)
        return Amount(f"{count} {_unit_word(rng, 'm', n != 1)}", n * 100.0)
    if r < 0.6:  # halves
        n = rng.randint(0, 4)
        metre = _unit_word(rng, "m", False)
        if n == 0:
            return Amount(f"half a {metre}", 50.0)
        if n == 1 and rng.random() < 0.6:
            return Amount(f"a {metre} and a half", 150.0)
        return Amount(f"{number_words(n)} and a half {_unit_word(rng, 'm', True)}", n * 100 + 50.0)
    # centimetres in words, mostly round
    r2 = rng.random()
    if r2 < 0.7:
        v = rng.randrange(20, 501, 10)
    elif r2 < 0.93:
        v = rng.randint(20, 500)
    else:
        v = rng.choice((10, 15, 600, 700))
    words = number_words(v)
    if words.startswith("one hundred") and rng.random() < 0.5:
        words = "a" + words[3:]
    return Amount(f"{words} {_unit_word(rng, 'cm', True)}", float(v))


def _distance_imperial(rng: random.Random) -> Amount:
    r = rng.random()
    if r < 0.35:  # numeral feet
        n = rng.randint(1, 15) if rng.random() < 0.9 else rng.choice((18, 20, 25))
        return Amount(_with_unit(rng, str(n), "ft", n, abbreviate=0.4), _cm(n * 30.48))
    if r < 0.6:  # feet in words
        phrase, n = rng.choice(
            (
                ("a foot", 1),
                ("one foot", 1),
                ("a couple of feet", 2),
                ("a couple feet", 2),
                *((f"{number_words(k)} feet", k) for k in range(2, 13)),
            )
        )
        return Amount(phrase, _cm(n * 30.48))
    if r < 0.92:  # numeral inches
        n = rng.randint(8, 120) if rng.random() < 0.9 else rng.choice((2, 4, 6))
        return Amount(_with_unit(rng, str(n), "in", n, abbreviate=0.35), _cm(n * 2.54))
    phrase, n = rng.choice(
        (
            ("a dozen inches", 12),
            ("eighteen inches", 18),
            ("twenty inches", 20),
            ("thirty inches", 30),
        )
    )
    return Amount(phrase, _cm(n * 2.54))


def _distance_vague(rng: random.Random) -> Amount:
    return Amount(rng.choice(VAGUE_DISTANCES), float(VAGUE_CM))


_DISTANCE_FORMS = (
    (0.31, _distance_cm),
    (0.04, _distance_mm),
    (0.30, _distance_m),
    (0.15, _distance_words),
    (0.10, _distance_imperial),
    (0.10, _distance_vague),
)


def distance(rng: random.Random) -> Amount:
    """A drone distance as people say it; `value` in cm (a few lie outside 20..500)."""
    return _weighted(rng, _DISTANCE_FORMS)


def drone_moves(cm: float) -> list[int]:
    """The moves (cm each) a plan makes for a distance, by the module's policy."""
    if not cm >= 0 or cm == float("inf"):
        raise ValueError(f"a drone distance must be a finite number of cm >= 0, got {cm}")
    total = int(cm + 0.5)
    if total <= MOVE_MAX_CM:
        return [max(total, MOVE_MIN_CM)]
    full, rest = divmod(total, MOVE_MAX_CM)
    moves = [MOVE_MAX_CM] * full + ([rest] if rest else [])
    if 0 < rest < MOVE_MIN_CM:
        moves[-2] -= MOVE_MIN_CM - rest
        moves[-1] = MOVE_MIN_CM
    return moves


# --- angles -----------------------------------------------------------------------

_COMMON_DEGREES = (15, 20, 30, 45, 60, 90, 90, 90, 120, 135, 150, 180, 180, 270, 360)
_OUTSIDE_DEGREES = (400.0, 450.0, 540.0, 720.0, 0.5)

TURN_PHRASES = (
    ("a quarter turn", 90),
    ("a quarter of a turn", 90),
    ("a right angle", 90),
    ("half a turn", 180),
    ("a half turn", 180),
    ("around", 180),
    ("right around", 180),
    ("half a circle", 180),
    ("a third of a circle", 120),
    ("a third of a turn", 120),
    ("three quarters of a turn", 270),
    ("an eighth of a turn", 45),
    ("a sixth of a turn", 60),
    ("all the way round", 360),
    ("all the way around", 360),
    ("a full turn", 360),
    ("a full circle", 360),
    ("a whole turn", 360),
    ("two full turns", 720),
)


def _degree_unit(rng: random.Random, n: float) -> str:
    spelled = rng.choice(("degrees", "degrees", "°", "deg"))
    if spelled == "degrees" and n == 1:
        spelled = "degree"
    return spelled


def _angle_numeral(rng: random.Random) -> Amount:
    r = rng.random()
    if r < 0.6:
        v = float(rng.choice(_COMMON_DEGREES))
    elif r < 0.93:
        v = float(rng.randint(1, 360))
    elif r < 0.96:
        v = rng.choice((22.5, 7.5, 67.5, 12.5))
    else:
        v = rng.choice(_OUTSIDE_DEGREES)
    unit = _degree_unit(rng, v)
    glue = "" if unit == "°" or (unit == "deg" and rng.random() < 0.3) else " "
    return Amount(f"{v:g}{glue}{unit}", v)


def _angle_words(rng: random.Random) -> Amount:
    n = rng.choice(_COMMON_DEGREES) if rng.random() < 0.75 else rng.randint(1, 360)
    return Amount(f"{number_words(n)} {'degree' if n == 1 else 'degrees'}", float(n))


def _angle_phrase(rng: random.Random) -> Amount:
    text, v = rng.choice(TURN_PHRASES)
    return Amount(text, float(v))


def angle(rng: random.Random) -> Amount:
    """A turn as people say it; `value` in degrees, read after "turn" ("turn {text}")."""
    return _weighted(rng, ((0.45, _angle_numeral), (0.2, _angle_words), (0.35, _angle_phrase)))


def angle_degrees(deg: float) -> int:
    """A turn's degrees for the skill: rounded (halves up), clamped into 1..360."""
    if deg != deg or deg in (float("inf"), float("-inf")):
        raise ValueError(f"an angle must be a finite number of degrees, got {deg}")
    return min(max(int(deg + 0.5) if deg >= 0 else 0, ANGLE_MIN_DEG), ANGLE_MAX_DEG)


# --- durations --------------------------------------------------------------------

DURATION_PHRASES = (
    ("a second", 1.0),
    ("a sec", 1.0),
    ("half a second", 0.5),
    ("half a minute", 30.0),
    ("a quarter of a minute", 15.0),
    ("a couple of seconds", 2.0),
    ("a couple of secs", 2.0),
    ("a few seconds", float(VAGUE_SECONDS)),
    ("a moment", float(VAGUE_SECONDS)),
)


def _seconds_unit(rng: random.Random, n: float, abbreviate: float, symbol: bool = True) -> str:
    """ "s" only after digits (`symbol`): "3 s" reads, "three s" does not."""
    if rng.random() < abbreviate:
        short = ("s", "sec") if symbol else ("sec",)
        return rng.choice(short if n == 1 else (*short, "secs"))
    return "second" if n == 1 else "seconds"


def _duration_numeral(rng: random.Random) -> Amount:
    r = rng.random()
    if r < 0.6:
        v = float(rng.randint(1, 10))
    elif r < 0.85:
        v = float(rng.randint(11, 30))
    else:
        v = rng.choice((0.5, 1.5, 2.5, 3.5, 0.2, 7.5))
    unit = _seconds_unit(rng, v, abbreviate=0.45)
    glue = "" if unit == "s" and rng.random() < 0.5 else " "
    return Amount(f"{_numeral(rng, v)}{glue}{unit}", v)


def _duration_words(rng: random.Random) -> Amount:
    if rng.random() < 0.2:
        n = rng.randint(1, 3)
        half = f"{number_words(n)} and a half"
        return Amount(f"{half} {_seconds_unit(rng, 2, 0.3, symbol=False)}", n + 0.5)
    n = rng.randint(1, 10) if rng.random() < 0.75 else rng.choice((15, 20, 25, 30))
    return Amount(f"{number_words(n)} {_seconds_unit(rng, n, 0.3, symbol=False)}", float(n))


def _duration_phrase(rng: random.Random) -> Amount:
    text, v = rng.choice(DURATION_PHRASES)
    return Amount(text, v)


def duration(rng: random.Random) -> Amount:
    """A wait as people say it; `value` in seconds, inside 0.1..30."""
    return _weighted(
        rng, ((0.5, _duration_numeral), (0.25, _duration_words), (0.25, _duration_phrase))
    )


# --- arm positions ----------------------------------------------------------------


def _arm_target(rng: random.Random) -> tuple[int, int, int]:
    """Multiples of 10 mm mostly (so cm and m forms stay short); 8% outside the workspace."""
    step = 10 if rng.random() < 0.8 else 1
    (x0, x1), (y0, y1), (z0, z1) = ARM_WORKSPACE_MM
    xyz = [
        rng.randrange(x0, x1 + 1, step),
        rng.randrange(y0, y1 + 1, step),
        rng.randrange(z0, z1 + 1, step),
    ]
    if rng.random() < 0.08:
        axis = rng.randrange(3)
        xyz[axis] = rng.choice(((100, 800, 900), (-650, -550, 550, 650), (-50, 650, 700))[axis])
    return xyz[0], xyz[1], xyz[2]


def _signed(rng: random.Random, v: float) -> str:
    text = f"{abs(v):g}"
    return (rng.choice(("minus ", "-")) + text) if v < 0 else text


def arm_position(rng: random.Random) -> tuple[str, tuple[int, int, int]]:
    """A gripper target as an operator writes it, and the same point in mm (ints)."""
    x, y, z = _arm_target(rng)
    whole_cm = x % 10 == 0 and y % 10 == 0 and z % 10 == 0
    forms: list[str] = [
        f"x {x}, y {y}, z {z}",
        f"x={x} y={y} z={z}",
        f"({x}, {y}, {z}) mm",
        f"x {x} mm, y {y} mm, z {z} mm",
        f"x={x / 1000:g}m y={y / 1000:g}m z={z / 1000:g}m",
        f"x {x / 1000:g} m, y {_signed(rng, y / 1000)} m, z {z / 1000:g} m",
    ]
    if whole_cm:
        forms.append(f"x {x // 10} cm, y {_signed(rng, y / 10)} cm, z {z // 10} cm")
        forms.append(f"({x // 10}, {y // 10}, {z // 10}) cm")
    return rng.choice(forms), (x, y, z)
