"""Statements that must end within the segment limit, under a grammar.

The segmenter ends a task whose statement runs past `max_segment_tokens` without
ending (the robot is never sent garbage). Under a grammar a statement is valid
by construction but may still run long: a block the model keeps filling. In a
statement's last `grammar_close_within` tokens of the limit the service asks an
engine that can (`ClosingEngine`) to close the plan: its open blocks close at the
next statement boundary and the plan ends there, as near the token limit (the
engine's own window, `SamplingParams.close_within`). The plan ends rather than
goes on, because what a model writes after a block it was made to cut short is
no longer the plan it meant. A rollback after a failed segment lifts it: the plan
continues from an earlier point.
"""

from __future__ import annotations

from timely_core.engine.protocol import ClosingEngine, Engine, SamplingParams
from timely_core.serving.generation import Generation


def update_closing(engine: Engine, generation: Generation, params: SamplingParams) -> None:
    """Ask the engine to close `generation` (decoded with `params`) once its
    statement nears the segment limit."""
    if generation.closing or not _closable(engine, generation, params):
        return
    segmenter = generation.segmenter
    left = segmenter.max_segment_tokens - segmenter.pending_tokens
    if left <= params.close_within:
        assert isinstance(engine, ClosingEngine)
        # a whole window may not fit before the limit (a short segment limit): the
        # engine's window is then the tokens left, so its hard half still comes
        engine.set_closing(generation.gen_id, True, within=max(1, left))
        generation.closing = True


def lift_closing(engine: Engine, generation: Generation) -> None:
    """Lift a close request (the plan goes on from a rollback)."""
    if generation.closing and generation.in_engine and isinstance(engine, ClosingEngine):
        engine.set_closing(generation.gen_id, False)
    generation.closing = False


def _closable(engine: Engine, generation: Generation, params: SamplingParams) -> bool:
    return (
        params.grammar is not None
        and params.close_within > 0
        and generation.in_engine
        and isinstance(engine, ClosingEngine)
    )
