"""Whether a plan candidate may be kept (`CandidateEngine.accept`): decoded ahead of
the service, a candidate's statements were never closed at the robot's segment
limit, so one that outgrows it, or that its language rejects, would fail the task.
Segmented here as the service will segment it, it is left out instead."""

from __future__ import annotations

from timely_core.language.segmenter import SegmentationError
from timely_core.serving.state import ServiceState


def plan_fits(state: ServiceState, gen_id: int, ids: list[int]) -> bool:
    """`ids` (a whole plan, EOS left out) as generation `gen_id`'s plan: every
    statement complete within its robot's segment limit, the plan parsed to its
    end. Candidates are decoded only for a plan's start (`iteration.py`)."""
    generation = state.by_gen_id.get(gen_id)
    if generation is None:
        return False
    segmenter = state.fresh_segmenter(generation)
    try:
        for token in ids:
            segmenter.push(token)
        segmenter.close()
    except SegmentationError:
        return False
    return True
