"""TimelyLLM Eq. 4: potential-utility-density (PUD) priority of a segment.

    Pri(s_k, t) = [delta_k * TUF0(W(s_k; t)) + (1 - delta_k) * TUF1(W(s_k; t))]
                  / (G(s_k) * L(s_k))

- delta_k is 1 for the first segment (k = 0), else 0.
- W(s_k; t) is the waiting time of the segment if its generation starts at t and
  takes G: `t + G - ref`, where ref is the request's arrival for k = 0 and the
  estimated completion of the previous segment's execution for k > 0.
- TUF1 is TUF0 with ERT 0, so both are `TUF(W)` with the segment's own ERT
  (the request's ERT for k = 0, 0 for k > 0): one formula vectorises both.
- G is the expected generation time of the segment (paper: 90 ms profiled).
- L is the slack, the time to spare before the segment's deadline (ref + ERT)
  if generated from t: `ref + ERT - t - G`. It is floored at `min_slack_s` so a
  segment at or past its deadline keeps a finite (largest) scale and then loses
  priority with its utility, at the TUF's slope.

Priorities of everything queued change with t, so the scheduler recomputes them
at every decision; the numpy form costs a few microseconds for 1,000 entries.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from timely_core.scheduling.tuf import Tuf

FloatArray = npt.NDArray[np.float64]

# Paper §7: segment generation time profiled at 90 ms.
DEFAULT_SEGMENT_GENERATION_S = 0.09
# Floor of the slack L: a millisecond, the resolution the scheduler works at.
DEFAULT_MIN_SLACK_S = 1e-3


def segment_waiting_s(now_s: float, ref_s: float, segment_generation_s: float) -> float:
    """W(s_k; t): waiting time of the segment if its generation starts at `now_s`."""
    return now_s + segment_generation_s - ref_s


def slack_s(
    now_s: float,
    deadline_s: float,
    segment_generation_s: float,
    min_slack_s: float = DEFAULT_MIN_SLACK_S,
) -> float:
    """L(s_k): time to spare before the segment's deadline, floored at `min_slack_s`."""
    return max(deadline_s - now_s - segment_generation_s, min_slack_s)


def pud_priority(
    now_s: float,
    tuf: Tuf,
    first_segment: bool,
    ref_s: float,
    segment_generation_s: float = DEFAULT_SEGMENT_GENERATION_S,
    min_slack_s: float = DEFAULT_MIN_SLACK_S,
) -> float:
    """Eq. 4 for one segment. `ref_s`: arrival (k = 0) or the estimated completion of
    the previous segment's execution (k > 0)."""
    if segment_generation_s <= 0:
        raise ValueError(f"segment_generation_s must be > 0, got {segment_generation_s}")
    if min_slack_s <= 0:
        raise ValueError(f"min_slack_s must be > 0, got {min_slack_s}")
    waiting = segment_waiting_s(now_s, ref_s, segment_generation_s)
    delta_k = 1.0 if first_segment else 0.0
    utility = delta_k * tuf.utility(waiting) + (1.0 - delta_k) * tuf.resumed_utility(waiting)
    ert = tuf.expected_response_time_s if first_segment else 0.0
    slack = slack_s(now_s, ref_s + ert, segment_generation_s, min_slack_s)
    return utility / (segment_generation_s * slack)


def pud_priorities(
    now_s: float,
    ref_s: FloatArray,
    ert_s: FloatArray,
    slope: FloatArray,
    initial_utility: FloatArray,
    segment_generation_s: FloatArray,
    min_slack_s: float = DEFAULT_MIN_SLACK_S,
) -> FloatArray:
    """Eq. 4 for many segments at once. `ert_s` holds the request's ERT for first
    segments and 0 for resumed ones (TUF1), which is the only difference between
    TUF0 and TUF1; all arrays have one entry per segment."""
    start_to_ref = (now_s + segment_generation_s) - ref_s  # W(s_k; t)
    utility = slope * (start_to_ref - ert_s)
    utility += initial_utility
    np.minimum(utility, initial_utility, out=utility)
    np.maximum(utility, 0.0, out=utility)
    slack = ert_s - start_to_ref  # ref + ERT - t - G
    np.maximum(slack, min_slack_s, out=slack)
    slack *= segment_generation_s
    utility /= slack
    return utility
