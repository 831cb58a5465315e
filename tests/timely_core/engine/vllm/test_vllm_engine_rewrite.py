"""`VllmEngine.rewrite` (plans that react) on the planner checkpoint, in process: a
rollback then generates exactly what a fresh generation on the kept ids does, with
the kept full blocks restored by vLLM's prefix cache; appended ids (an observation)
are input, never output, and count towards max_tokens; the protocol's errors change
nothing (rewrite_testkit.py has the scenarios, shared with the server engine)."""

from __future__ import annotations

from typing import Any

from rewrite_testkit import (
    BLOCK,
    check_a_full_budget_of_appended_ids,
    check_errors,
    check_observation,
    check_rollback,
    observation_ids,
    running_prompt,
)

from timely_core.engine.protocol import HandlingStrategy


def test_a_rollback_resumes_from_the_kept_ids_and_their_cached_blocks(vllm_engine: Any) -> None:
    prompt = running_prompt(vllm_engine, 1000, 3)
    state = check_rollback(vllm_engine, 100, prompt)
    # the resumed request found every full block of prompt + 14 kept ids in the cache
    # (past the prompt's own: kept generated ids too); vLLM recomputes the last one
    assert state.cached_history[-1] == (len(prompt) + 14 - 1) // BLOCK * BLOCK > len(prompt)
    assert state.submissions == 2


def test_an_observation_is_input_and_counts_towards_max_tokens(vllm_engine: Any) -> None:
    prompt = running_prompt(vllm_engine, 2000, 4, 10)
    before = vllm_engine.rewrites
    state = check_observation(vllm_engine, 200, prompt, HandlingStrategy.DISCARD)
    # the resumed request finds the whole context cached (check_observation's probe
    # of the model's own continuation wrote it); vLLM recomputes the last token
    context = len(prompt) + 10 + len(observation_ids())
    assert state.cached_history[-1] == (context - 1) // BLOCK * BLOCK
    check_a_full_budget_of_appended_ids(vllm_engine, 210, prompt)
    assert vllm_engine.rewrites == before + 2


def test_rewrite_errors_change_nothing(vllm_engine: Any) -> None:
    check_errors(
        vllm_engine, 300, running_prompt(vllm_engine, 3000, 5), vllm_engine.config.max_model_len
    )
    memory = vllm_engine.memory()
    assert memory.device_blocks_free == memory.device_blocks_total  # nothing left running
