"""Observations in a generation: spans of its ids appended as input by
`RewritableEngine.rewrite` (its `observed` argument) that a plan grammar does not
read. The grammar constrains what the planner writes; an observation is what the
world wrote (a tool's answer, a robot's failure), in a form the grammar has no rule
for. So a grammar replays a generation's ids without its observations and goes on
after one from the state the plan text before it left: between two statements.

Spans are `(start, end)` offsets into the generation's ids past its prompt, sorted
and disjoint; every engine keeps them beside those ids.
"""

from __future__ import annotations

from collections.abc import Sequence

Span = tuple[int, int]


def check_observed(observed: Span | None, appended: int, what: str) -> None:
    """ValueError unless `observed` is None or a span of the `appended` ids."""
    if observed is None:
        return
    if (
        not isinstance(observed, tuple)
        or len(observed) != 2
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in observed)
    ):
        raise ValueError(f"{what}: observed must be a (start, end) pair of ints, got {observed!r}")
    start, end = observed
    if not 0 <= start <= end <= appended:
        raise ValueError(
            f"{what}: observed={observed} is not a span of the {appended} appended ids"
        )


def rewritten_spans(
    spans: Sequence[Span], keep_generated: int, observed: Span | None
) -> list[Span]:
    """The spans after a rewrite that keeps `keep_generated` ids (a span the cut
    goes through keeps its kept part) and appends ids with `observed` among them."""
    kept = [(s, min(e, keep_generated)) for s, e in spans if s < keep_generated]
    if observed is not None and observed[0] < observed[1]:
        kept.append((keep_generated + observed[0], keep_generated + observed[1]))
    return kept


def plan_ids(generated: Sequence[int], spans: Sequence[Span]) -> list[int]:
    """`generated` without the observed spans: the ids a grammar reads."""
    if not spans:
        return list(generated)
    ids: list[int] = []
    at = 0
    for start, end in spans:
        ids.extend(generated[at:start])
        at = max(at, end)
    ids.extend(generated[at:])
    return ids
