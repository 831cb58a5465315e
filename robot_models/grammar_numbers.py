"""Regular expressions for numbers inside a range, so a grammar can state a skill's
limits exactly instead of leaving them to a check after the fact.

Numbers are written canonically: no leading zeros, no `-0`, at least one digit
after a decimal point. The plan parser also reads `020` or `-0`; the grammar never
writes them (a planner has no reason to, and each extra form is one more way for a
small model to wander). The expressions use only what Python's `re` and Rust's
`regex` (llguidance) read alike: classes, `(?:...)`, `|` and `{m,n}`.
"""

from __future__ import annotations

import math
from decimal import Decimal

MAX_INT_DIGITS = 18  # an unbounded side of a range: at most this many digits
MAX_FRACTION_DIGITS = 9  # digits after the decimal point


def int_range_regex(low: int | None, high: int | None) -> str:
    """Canonical integers n with low <= n <= high (None: unbounded, within
    MAX_INT_DIGITS digits)."""
    cap = 10**MAX_INT_DIGITS - 1
    low = -cap if low is None else max(low, -cap)
    high = cap if high is None else min(high, cap)
    if low > high:
        raise ValueError(f"empty integer range [{low}, {high}]")
    parts: list[str] = []
    if low < 0:
        negative = _non_negative(max(1, -high), -low)
        parts.append("-" + _group(negative))
    if high >= 0:
        parts.extend(_non_negative(max(0, low), high))
    return _join(parts)


def decimal_range_regex(low: float | None, high: float | None) -> str:
    """Canonical decimals `I.F` (1 to MAX_FRACTION_DIGITS digits F) whose exact value
    lies in [low, high], or integers in it. Bounds are read as their shortest decimal
    (`repr`), so a text accepted here converts with `float()` to a value the float
    bounds also accept: rounding is monotonic and each bound rounds to itself."""
    lo = None if low is None else Decimal(repr(float(low)))
    hi = None if high is None else Decimal(repr(float(high)))
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"empty decimal range [{low}, {high}]")
    parts: list[str] = []
    int_low = None if lo is None else math.ceil(lo)
    int_high = None if hi is None else math.floor(hi)
    if int_low is None or int_high is None or int_low <= int_high:
        parts.append(int_range_regex(int_low, int_high))
    if hi is None or hi >= 0:
        parts.extend(_fractions(Decimal(0) if lo is None else max(lo, Decimal(0)), hi))
    if lo is None or lo < 0:
        # "-" then a magnitude > 0 (no "-0.0"): at least the smallest one written
        smallest = Decimal(1).scaleb(-MAX_FRACTION_DIGITS)
        magnitude_low = smallest if hi is None or hi >= 0 else max(-hi, smallest)
        magnitude_high = None if lo is None else -lo
        if magnitude_high is None or magnitude_low <= magnitude_high:
            parts.append("-" + _group(_fractions(magnitude_low, magnitude_high)))
    return _join(parts)


# ---- integers -----------------------------------------------------------------------


def _non_negative(low: int, high: int) -> list[str]:
    """Alternatives for low..high (0 <= low <= high), grouped by digit count."""
    parts: list[str] = []
    full: list[int] = []  # digit counts covered whole (1 to 9, 10 to 99, ...)
    for digits in range(len(str(low)), len(str(high)) + 1):
        first = 0 if digits == 1 else 10 ** (digits - 1)
        lo, hi = max(low, first), min(high, 10**digits - 1)
        if lo > hi:
            continue
        if hi == 10**digits - 1 and lo == first and digits > 1:
            full.append(digits)
        else:
            parts.extend(_same_length(str(lo), str(hi)))
    if full:  # consecutive by construction: one run of whole digit counts
        parts.append("[1-9]" + _any_digits(min(full) - 1, max(full) - 1))
    return parts


def _same_length(lo: str, hi: str) -> list[str]:
    """Digit strings s of one length with lo <= s <= hi (compared as text)."""
    if lo == hi:
        return [lo]
    rest = len(lo) - 1
    if rest == 0:
        return [_digits(lo, hi)]
    if lo[0] == hi[0]:
        return [lo[0] + _group(_same_length(lo[1:], hi[1:]))]
    parts: list[str] = []
    start, end = int(lo[0]), int(hi[0])
    if lo[1:] == "0" * rest:
        start -= 1  # lo's first digit takes any tail: joins the middle run
    else:
        parts.append(lo[0] + _group(_same_length(lo[1:], "9" * rest)))
    full_end = end if hi[1:] == "9" * rest else end - 1
    if start + 1 <= full_end:
        parts.append(_digits(str(start + 1), str(full_end)) + _any_digits(rest, rest))
    if full_end < end:
        parts.append(hi[0] + _group(_same_length("0" * rest, hi[1:])))
    return parts


# ---- decimals with a fraction ---------------------------------------------------------


def _fractions(low: Decimal, high: Decimal | None) -> list[str]:
    """`I.F` with low <= I.F <= high (0 <= low; high None: unbounded)."""
    low_int, low_frac = _split(low)
    m = MAX_FRACTION_DIGITS
    if high is None:
        top = 10**MAX_INT_DIGITS - 1
        above = [_group(_non_negative(low_int + 1, top)) + r"\." + _any_digits(1, m)]
        return [_point(low_int, _digits_between(low_frac, None, m)), *above]
    high_int, high_frac = _split(high)
    if low_int == high_int:
        return [_point(low_int, _digits_between(low_frac, high_frac, m))]
    parts = [_point(low_int, _digits_between(low_frac, None, m))]
    if low_int + 1 <= high_int - 1:
        parts.append(_group(_non_negative(low_int + 1, high_int - 1)) + r"\." + _any_digits(1, m))
    parts.append(_point(high_int, _digits_between("", high_frac, m)))
    return parts


def _split(value: Decimal) -> tuple[int, str]:
    """Integer part and fraction digits (no trailing zeros) of value >= 0."""
    whole = int(value)
    text = format(value - whole, "f")
    return whole, text.partition(".")[2].rstrip("0")


def _point(whole: int, fraction: list[str]) -> str:
    """`whole.` then one of the non-empty `fraction` alternatives."""
    return f"{whole}" + r"\." + _group([f for f in fraction if f])


def _digits_between(lo: str, hi: str | None, m: int) -> list[str]:
    """Digit strings t of length 0..m with 0.lo <= 0.t <= 0.hi (hi None: below 1),
    as alternatives; "" (the empty t, worth 0) is one when 0.lo is 0. `lo` and `hi`
    have no trailing zeros."""
    parts = [""] if not lo else []
    if m <= 0:
        return parts
    if not lo and hi is None:
        return ["", _any_digits(1, m)]
    if not lo and not hi:
        return ["", f"0{{1,{m}}}"]
    first = int(lo[0]) if lo else 0
    last = 9 if hi is None else (int(hi[0]) if hi else 0)
    for digit in range(first, last + 1):
        at_low, at_high = digit == first, hi is not None and digit == last
        if not at_low and not at_high:
            continue  # the digits strictly inside: one class below
        tail = _digits_between(
            lo[1:] if at_low else "", (hi[1:] if hi else "") if at_high else None, m - 1
        )
        if tail:
            parts.append(str(digit) + _group(tail))
    if first + 1 <= last - (0 if hi is None else 1):
        inner_last = last if hi is None else last - 1
        parts.append(_digits(str(first + 1), str(inner_last)) + _any_digits(0, m - 1))
    return parts


# ---- text helpers -------------------------------------------------------------------


def _digits(lo: str, hi: str) -> str:
    return lo if lo == hi else f"[{lo}-{hi}]"


def _any_digits(low: int, high: int) -> str:
    if high <= 0:
        return ""
    if low == high:
        return "[0-9]" if low == 1 else f"[0-9]{{{low}}}"
    if (low, high) == (0, 1):
        return "[0-9]?"
    return f"[0-9]{{{low},{high}}}"


def _group(parts: list[str]) -> str:
    """One expression for the alternatives; an empty alternative makes it optional."""
    rest = [p for p in parts if p]
    if not rest:
        return ""
    body = rest[0] if len(rest) == 1 and "|" not in rest[0] else "(?:" + "|".join(rest) + ")"
    if len(rest) < len(parts):
        return body + "?" if body.startswith("(?:") and body.endswith(")") else f"(?:{body})?"
    return body


def _join(parts: list[str]) -> str:
    return "(?:" + "|".join(parts) + ")" if len(parts) > 1 else parts[0]
