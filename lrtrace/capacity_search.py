"""The largest size that still passes a test: exponential, then binary search.

Each test is a set of replays, so the search asks as few sizes as it can: it
doubles from a starting size until a size fails (or the limit passes), then bisects
between the last pass and the first fail until they are `precision` apart. It
assumes the test is monotone (a fleet that fails keeps failing when it grows),
which simulated load is up to noise; every size it tried is kept, so a reader can
see where that assumption was tested.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Boundary:
    passed: int  # largest size that passed; 0 when none did (0 passes by convention)
    failed: int | None  # smallest size that failed; None when the limit passed
    tried: dict[int, bool] = field(default_factory=dict)  # every size asked, in order

    @property
    def at_limit(self) -> bool:
        return self.failed is None


def resolution(passed: int, precision: float) -> int:
    """How far apart the last pass and the first fail may end: `precision` of the
    passing size, at least 1 (exact)."""
    return max(1, int(precision * passed))


def find_boundary(
    passes: Callable[[int], bool], start: int, limit: int, precision: float = 0.0
) -> Boundary:
    """`passes(n)` is asked once per size tried, sizes between 1 and `limit`."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if not 0 <= precision < 1:
        raise ValueError(f"precision must be in [0, 1), got {precision}")
    tried: dict[int, bool] = {}

    def ask(n: int) -> bool:
        tried[n] = passes(n)
        return tried[n]

    lo, hi = 0, min(max(1, start), limit)
    if ask(hi):
        lo = hi
        hi_or_none: int | None = None
        while lo < limit:
            n = min(2 * lo, limit)
            if ask(n):
                lo = n
            else:
                hi_or_none = n
                break
        if hi_or_none is None:
            return Boundary(lo, None, tried)
        hi = hi_or_none
    while hi - lo > resolution(lo, precision):
        mid = (lo + hi) // 2
        if ask(mid):
            lo = mid
        else:
            hi = mid
    return Boundary(lo, hi, tried)
