"""Lists of integers as flags and YAML write them: `1-8`, `1,3,5`, `1-3,9`.

One parser for `--trace-ids`, `--max-batch`, `--kv-tokens` and a workload's or fleet
mix's `trace_ids`, so they accept the same text and refuse it the same way: a
reversed range (`3-1`) is named as such rather than read as nothing, and a range is
bounded, since `1-1000000000000` would build its list before any check could refuse
a value in it.
"""

from __future__ import annotations

import re
from typing import Final

MAX_RANGE: Final = 100_000  # values one range may expand to
_PART: Final = re.compile(r"\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?")


def parse_int_list(text: str, what: str = "integers") -> list[int]:
    """The integers of `text` in order (negative ones included, for the caller's range
    check to name); ValueError with one line naming the part that is wrong. `what`
    names the list in that line (`not a list of trace ids: ...`)."""
    out: list[int] = []
    for part in text.split(","):
        if not part.strip():
            continue
        match = _PART.fullmatch(part)
        if match is None:
            raise ValueError(f"not a list of {what}: {text!r} (use e.g. 1-8 or 1,3,9)")
        lo = int(match[1])
        hi = lo if match[2] is None else int(match[2])
        if hi < lo:
            raise ValueError(f"reversed range {part.strip()!r} in {text!r}: write {hi}-{lo}")
        if hi - lo >= MAX_RANGE:
            raise ValueError(f"range {part.strip()!r} has more than {MAX_RANGE:,} values")
        out.extend(range(lo, hi + 1))
    return out
