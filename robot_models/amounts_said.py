"""Amounts an operator states in a request, read into the skills' units: "go up 1
meter" is a length of 100 cm, "a quarter turn" 90 degrees, "half a minute" 30 s,
"x 45 cm, y 20 cm" two lengths, "go forward 120" a bare 120 in whatever unit the
skill takes.

The planner is a small model: it copies an unseen number far less reliably than it
recalls a common one ("go up 1 meter" became `mu(101)`), and it cannot convert
units. The language (language.py) turns what is read here into each numeric
argument's candidate values, and the engine's copy bias favours them where the
model writes that argument (timely_core/engine/copy_bias.py). Reading is policy
free: the skills' ranges and rounding are the language's (dataset/amounts.py).

Number words are read by text2num; fractions ("half a", "a metre and a half", "a
third of a circle"), vague amounts ("a bit": dataset/amounts.VAGUE_CM) and turning
phrases ("turn around") here, before it, since text2num reads "a third" as an
ordinal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from text_to_num import alpha2digit

from robot_models.dataset.amounts import (
    DURATION_PHRASES,
    TURN_PHRASES,
    VAGUE_CM,
    VAGUE_DISTANCES,
)

Kind = Literal["length", "angle", "duration", "bare"]
MAX_VALUE = 1e9  # larger (or not finite) is no amount anybody states


@dataclass(frozen=True)
class SaidAmount:
    """One amount of a request: a length in cm, an angle in degrees, a duration in
    seconds, or a bare number (no unit said) as written; with the coordinate letter
    written before it, if any."""

    kind: Kind
    value: float
    label: str = ""  # the letter it was given ("x 45 cm", "z=0.1m"), lower case


# what a matched phrase reads as (None: not an amount after all)
_Reading = Callable[[re.Match[str]], SaidAmount | None]

# unit words -> (kind, value of one in cm, degrees or s); `_GLUED_ONLY` units only
# right after digits ("3in"), where they cannot be an ordinary word ("3 in the box")
_UNITS: dict[str, tuple[Kind, float]] = {}
for _words, _kind, _factor in (
    (("m", "metre", "metres", "meter", "meters", "mtr", "mtrs"), "length", 100.0),
    (("cm", "cms", "centimetre", "centimetres", "centimeter", "centimeters"), "length", 1.0),
    (("mm", "millimetre", "millimetres", "millimeter", "millimeters"), "length", 0.1),
    (("ft", "foot", "feet"), "length", 30.48),
    (("in", "inch", "inches"), "length", 2.54),
    (("yd", "yds", "yard", "yards"), "length", 91.44),
    (("°", "deg", "degs", "degree", "degrees"), "angle", 1.0),
    (("turn", "turns", "rotation", "rotations", "revolution", "revolutions"), "angle", 360.0),
    (("circle", "circles", "spin", "spins"), "angle", 360.0),
    (("ms", "millisecond", "milliseconds"), "duration", 0.001),
    (("s", "sec", "secs", "second", "seconds"), "duration", 1.0),
    (("min", "mins", "minute", "minutes"), "duration", 60.0),
    (("h", "hr", "hrs", "hour", "hours"), "duration", 3600.0),
):
    for _word in _words:
        _UNITS[_word] = (_kind, _factor)  # type: ignore[assignment]
_GLUED_ONLY = frozenset({"in"})
# whole turns count with a number only in the plural ("2 turns"; "up 50 turn right"
# is not 50 turns); fractions take them singular ("a quarter turn")
_WHOLE_TURNS_PLURAL = frozenset({"turn", "rotation", "revolution", "circle", "spin"})
# units "a" or "one" stands before for one of them ("a foot", "a minute")
_ONE_OF = frozenset(
    {"metre", "meter", "foot", "yard", "inch", "centimetre", "centimeter", "minute", "second"}
)
_FRACTIONS = {
    "half": 0.5,
    "quarter": 0.25,
    "third": 1 / 3,
    "sixth": 1 / 6,
    "eighth": 1 / 8,
    "three quarters": 0.75,
    "two thirds": 2 / 3,
}
_COUNTS = {"dozen": 12.0, "couple": 2.0, "pair": 2.0}
_NUMBER_WORDS = (
    r"(?:(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|"
    r"sixty|seventy|eighty|ninety|hundred)[- ]?)+"
)
# words a bare number may be followed by (a count or a label is followed by a noun:
# "2 cups", "tube number 7 on the bench", "a 9 volt battery")
_AFTER_BARE = frozenset(
    [
        "then",
        "and",
        "or",
        "after",
        "before",
        "please",
        "pls",
        "plz",
        "thanks",
        "again",
        "more",
        "now",
        "first",
        "next",
        "x",
        "y",
        "z",
        "up",
        "down",
        "left",
        "right",
        "forward",
        "forwards",
        "back",
        "backwards",
        "ahead",
        "turn",
        "rotate",
        "spin",
        "go",
        "fly",
        "move",
        "land",
        "take",
        "hover",
        "wait",
        "come",
        "climb",
        "drop",
        "descend",
    ]
)

# what may follow a vague amount ("a bit closer", "a little to the left")
_VAGUE_FOLLOWERS = (
    r"(?:to|closer|nearer|further|farther|more|higher|lower|up|down|left|right|forwards?|"
    r"backwards?|back|ahead|over|then|and|please|pls|plz|now|in|out|away|towards?)\b"
)
_NUM = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"
_UNIT_ALT = "|".join(sorted((re.escape(u) for u in _UNITS), key=len, reverse=True))
_UNIT = rf"(?P<unit>{_UNIT_ALT})(?![\w°])"
_FRACTION_ALT = "|".join(f.replace(" ", "[- ]") for f in sorted(_FRACTIONS, key=len, reverse=True))
_TURN_VERB = r"\b(?:turn|spin|rotate|swing|pivot|twirl|yaw|swivel|face)\w*(?:\s+\w+)??\s+"
# turning phrases besides the generator's (TURN_PHRASES), read after a verb of turning
_MORE_TURNS = (("round", 180), ("the other way", 180), ("the opposite way", 180))


def amounts_said(text: str) -> list[SaidAmount]:
    """The amounts `text` states, in the order said (a plan's arguments follow it:
    "x 45 cm, y 20 cm, z 30 cm")."""
    found: list[SaidAmount] = []
    work = _normalized(text)
    work = _read_phrases(work, found)
    converted = _signed(alpha2digit(work, "en", threshold=0))
    converted = _read_with_units(converted, found)
    placed = [(converted.index(_marker(i)), amount) for i, amount in enumerate(found)]
    placed += _read_bare(converted, text)
    return [
        _labelled(amount, converted[:at])
        for at, amount in sorted(placed, key=lambda p: p[0])
        if abs(amount.value) <= MAX_VALUE  # "99999...9" is no amount (nor a float)
    ]


def _labelled(amount: SaidAmount, before: str) -> SaidAmount:
    """`amount` with the single letter right before it as its label ("x 45 cm",
    "y=-0.2 m", "z: 30")."""
    match = re.search(r"(?:^|[\s,;(])([b-hj-z])\s*[=:]?\s*$", before)  # not "a", "i"
    return replace(amount, label=match.group(1)) if match else amount


def _marker(index: int) -> str:
    """What the `index`-th amount read leaves in the text: no number, so nothing
    reads it twice, and it keeps the amount's place."""
    return f" ;amt{chr(97 + index // 26)}{chr(97 + index % 26)}; "


def _found(found: list[SaidAmount], amount: SaidAmount) -> str:
    found.append(amount)
    return _marker(len(found) - 1)


def _normalized(text: str) -> str:
    text = text.lower().replace("\u2019", "'").replace("\u2212", "-").replace("\u2013", "-")
    text = text.replace("\u00ba", "\u00b0")  # º written for °
    # a decimal comma ("1,5 m"), not a list ("6,3,5") or a list's item ("40, 5")
    text = re.sub(r"(?<![\d,])(\d+),(\d)(?![\d,])", r"\1.\2", text)
    return _signed(re.sub(r"\s+", " ", text))


def _signed(text: str) -> str:
    return re.sub(r"\b(?:minus|negative)\s+(?=[\d.])", "-", text)


def _spoken_unit(match: re.Match[str]) -> tuple[Kind, float] | None:
    """The kind and size of the unit `match` names, or None for one that counts only
    glued to its number ("3in"), as a phrase's unit is spaced."""
    unit = match.group("unit")
    return None if unit in _GLUED_ONLY else _UNITS[unit]


def _read_phrases(text: str, found: list[SaidAmount]) -> str:
    """Fractions, "a foot", vague amounts and turning phrases; returns `text` with
    what was read blanked."""

    def take(pattern: str, value: SaidAmount | _Reading) -> None:
        nonlocal text

        def one(match: re.Match[str]) -> str:
            amount = value(match) if callable(value) else value
            if not isinstance(amount, SaidAmount):
                return match.group(0)  # not an amount after all ("3 in the box")
            return _found(found, amount)

        text = re.sub(pattern, one, text)

    def scaled(number: float) -> _Reading:
        def read(match: re.Match[str]) -> SaidAmount | None:
            unit = _spoken_unit(match)
            return None if unit is None else SaidAmount(unit[0], number * unit[1])

        return read

    def with_fraction(match: re.Match[str]) -> SaidAmount | None:
        unit = _spoken_unit(match)
        whole = match.groupdict().get("whole") or "0"
        if not whole.isdigit():
            whole = alpha2digit(whole, "en", threshold=0)
        if unit is None or not whole.isdigit():
            return None
        fraction = _FRACTIONS[match.group("frac").replace("-", " ")]
        return SaidAmount(unit[0], (float(whole) + fraction) * unit[1])

    def slashed(match: re.Match[str]) -> SaidAmount | None:
        unit = _spoken_unit(match)
        if unit is None:
            return None
        fraction = int(match.group("num")) / int(match.group("den"))
        return SaidAmount(unit[0], (int(match.group("whole") or 0) + fraction) * unit[1])

    def counted(match: re.Match[str]) -> SaidAmount | None:
        unit = _spoken_unit(match)
        return (
            None if unit is None else SaidAmount(unit[0], _COUNTS[match.group("count")] * unit[1])
        )

    # "one and a half metres", "a metre and a half", "1 m and a half"
    take(rf"\b(?:one|an?)\s+and\s+an?\s+half\s+{_UNIT}", scaled(1.5))
    take(rf"\b(?:an?|one)\s+{_UNIT}\s+and\s+an?\s+half\b", scaled(1.5))
    take(rf"(?<![\d.])(?P<whole>\d+)\s*{_UNIT}\s+and\s+an?\s+(?P<frac>half)\b", with_fraction)
    take(
        rf"(?<![\d.])(?P<whole>\d+|{_NUMBER_WORDS})\s+and\s+an?\s+(?P<frac>half)\s+{_UNIT}",
        with_fraction,
    )
    # "1/2 m", "2 1/2 feet"
    take(rf"(?<![\d.])(?:(?P<whole>\d+)\s+)?(?P<num>\d+)/(?P<den>[1-9]\d*)\s*{_UNIT}", slashed)
    # "a dozen inches", "a couple of feet"
    take(rf"\b(?:an?\s+)?(?P<count>dozen|couple|pair)(?:\s+of)?\s+{_UNIT}", counted)
    # "half a meter", "a quarter turn", "a third of a circle", "three quarters of a turn"
    take(
        rf"\b(?:an?\s+|one\s+)?(?P<frac>{_FRACTION_ALT})s?\s+(?:of\s+)?(?:an?\s+)?{_UNIT}",
        with_fraction,
    )
    for phrase, degrees in sorted((*TURN_PHRASES, *_MORE_TURNS), key=lambda p: -len(p[0])):
        if phrase.startswith(("all the way", "a full", "a whole")):
            take(rf"\b{re.escape(phrase)}\b", SaidAmount("angle", float(degrees)))
        else:  # "around", "a right angle": a turn only after a verb of turning
            take(rf"{_TURN_VERB}{re.escape(phrase)}\b", SaidAmount("angle", float(degrees)))
    take(
        r"\b(?:full|whole|complete)\s+(?:turn|circle|rotation|revolution|spin)\b",
        SaidAmount("angle", 360.0),
    )
    for phrase, seconds in sorted(DURATION_PHRASES, key=lambda p: -len(p[0])):
        take(rf"\b{re.escape(phrase)}\b", SaidAmount("duration", seconds))
    for phrase in sorted(VAGUE_DISTANCES, key=len, reverse=True):
        # an amount, not an adjective: "a little to the left", not "a little dance"
        vague = rf"\b{re.escape(phrase)}\b(?!\s+(?!{_VAGUE_FOLLOWERS})[a-z])"
        take(vague, SaidAmount("length", float(VAGUE_CM)))
    # not "one metre fifty" (metres and centimetres, read after the number words)
    take(rf"\b(?:an?|one)\s+{_UNIT}(?!\s+(?:and\s+)?(?:\d|{_NUMBER_WORDS}))", _one_of)
    return text


def _metres_and_cm(match: re.Match[str]) -> SaidAmount | None:
    """ "1 m 20": 120 cm, but not "2 m 5 times" (a count follows)."""
    if _followed_by_word(match):
        return None
    return SaidAmount("length", int(match.group("m")) * 100.0 + int(match.group("cm")))


def _one_of(match: re.Match[str]) -> SaidAmount | None:
    """ "a foot", "a minute": one of a unit that is counted this way."""
    unit = match.group("unit")
    return SaidAmount(*_UNITS[unit]) if unit in _ONE_OF else None


def _read_with_units(text: str, found: list[SaidAmount]) -> str:
    """Numbers with a unit ("250cm", "45°", "1.5 m", "2-metre"), metres and
    centimetres ("1 m 20"), and lists whose last number carries the unit for all
    ("55, -10, 35 cm"); returns `text` with them blanked."""
    # at most 8 before the last: a position or two, and no scan of a long run per number
    listed = rf"(?P<list>(?:{_NUM}\s*(?:,|and)\s*){{1,8}})?(?P<last>{_NUM})"

    def metres_and_cm(match: re.Match[str]) -> str:
        amount = _metres_and_cm(match)
        return match.group(0) if amount is None else _found(found, amount)

    # "1 m 20", "one metre fifty", "2 metres 30 cm": metres and centimetres
    text = re.sub(
        r"(?<![\d.])(?P<m>\d+)\s*(?:m|metres?|meters?)\s+(?:and\s+)?(?P<cm>\d{1,2})"
        r"(?:\s*(?:cm|centimetres?|centimeters?))?(?![\w.])",
        metres_and_cm,
        text,
    )

    def one(match: re.Match[str]) -> str:
        unit = match.group("unit")
        glued = match.group("space") in ("", "-")
        if unit in _GLUED_ONLY and not glued and _followed_by_word(match):
            return match.group(0)  # "3 in the box"
        if unit in _WHOLE_TURNS_PLURAL:
            return match.group(0)
        kind, factor = _UNITS[unit]
        numbers = [*re.findall(_NUM, match.group("list") or ""), match.group("last")]
        return "".join(_found(found, SaidAmount(kind, float(n) * factor)) for n in numbers)

    # a list in brackets takes the unit after them: "(55, -10, 35) cm"
    # "a 2-metre climb", "a 90-degree turn": the unit joined by a hyphen
    return re.sub(rf"(?<![\w.]){listed}\)?(?P<space>\s*|-){_UNIT}", one, text)


def _followed_by_word(match: re.Match[str]) -> bool:
    """Whether a word other than a connective comes next after `match`."""
    following = re.match(r"\s*([a-z]+)", match.string[match.end() :])
    return following is not None and following.group(1) not in _AFTER_BARE


def _read_bare(text: str, original: str) -> list[tuple[int, SaidAmount]]:
    """Numbers without a unit that are amounts, not counts or labels: followed by
    nothing, punctuation or a connective ("go forward 120 then ..."), not glued to
    letters ("m3 screw"); "one" and "two" only when written as digits."""
    written = {float(n) for n in re.findall(rf"(?<![\w.]){_NUM}", original)}
    placed = []
    for match in re.finditer(rf"(?<![\w.]){_NUM}(?![\w°])", text):
        if _followed_by_word(match):
            continue
        value = float(match.group(0))
        if abs(value) < 3 and value not in written:
            continue
        placed.append((match.start(), SaidAmount("bare", value)))
    return placed
