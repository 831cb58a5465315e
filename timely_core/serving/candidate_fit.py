"""Whether a plan candidate may be kept (`CandidateEngine.accept`): decoded ahead of
the service, a candidate's statements were never closed at the robot's segment
limit, so one that outgrows it, or that its language rejects, would fail the task.
Segmented here as the service will segment it, it is left out instead."""

from __future__ import annotations

from timely_core.language.detokenizer import IncrementalDetokenizer
from timely_core.language.segmenter import SegmentationError, Segmenter
from timely_core.serving.state import ServiceState


def plan_fits(state: ServiceState, gen_id: int, ids: list[int]) -> bool:
    """`ids` (a whole plan, EOS left out) as generation `gen_id`'s plan: every
    statement complete within its robot's segment limit, the plan parsed to its
    end. Candidates are decoded only for a plan's start (`iteration.py`)."""
    generation = state.by_gen_id.get(gen_id)
    if generation is None:
        return False
    robot = state.robots.get(generation.robot_id)
    limit = robot.max_segment_tokens if robot is not None else state.config.max_segment_tokens
    segmenter = Segmenter(
        IncrementalDetokenizer(state.tokenizer, generation.prompt_ids),
        generation.language.new_parser(),
        limit,
    )
    try:
        for token in ids:
            segmenter.push(token)
        segmenter.close()
    except SegmentationError:
        return False
    return True
