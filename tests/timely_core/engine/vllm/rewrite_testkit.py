"""`RewritableEngine.rewrite` scenarios run on both vLLM engines (in process and
servers), greedy on the planner checkpoint: each compares what a rewritten generation
writes after `resume` with a fresh generation whose prompt is the rewritten context.

The prompts are a few random ids repeated, the first of a seed's that the planner
continues for a whole budget (`running_prompt`: no EOS cuts a comparison short; the
probe, `running_prompts`, serves any engine's tests); the observation is a failure in
the drone language's observation form, as the service appends it."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from vllm_testkit import PLANNER

from robot_models.language import load_language
from timely_core.engine.protocol import (
    Engine,
    EngineError,
    HandlingStrategy,
    RewritableEngine,
    SamplingParams,
    UnknownGeneration,
)
from timely_core.engine.torch.loader import load_tokenizer
from timely_core.engine.vllm.engine import VllmEngine
from timely_core.engine.vllm.generation import VllmGeneration
from timely_core.engine.vllm.server_engine import VllmServerEngine
from timely_core.tools.router import OBSERVATION_FORMAT

Backend = VllmEngine | VllmServerEngine
BLOCK = 32  # vLLM's CPU block size: its prefix cache holds whole blocks
MAX_TOKENS = 40


def looping_prompt(seed: int, length: int = 120) -> list[int]:
    rng = random.Random(seed)
    unit = [rng.randrange(2, 1536) for _ in range(rng.randrange(3, 9))]
    return (unit * (length // len(unit) + 1))[:length]


def running_prompts(
    engine: Engine, seeds: Iterable[int], probe_id: int, tokens: int, **add: Any
) -> Iterator[list[int]]:
    """The looping prompts of `seeds`, in order, that the planner continues for
    `tokens` ids without its EOS, probed greedily on `engine` (any engine, the torch
    one too) as generations `probe_id`, `probe_id` + 1, ..., one per seed tried.
    Lazy, so a caller probes only as many seeds as it takes prompts."""
    for offset, seed in enumerate(seeds):
        prompt = looping_prompt(seed)
        if len(fresh(engine, probe_id + offset, prompt, tokens, **add)) == tokens:
            yield prompt


def running_prompt(
    engine: Engine, probe_id: int, seed: int, tokens: int = MAX_TOKENS, **add: Any
) -> list[int]:
    """The first running prompt from `seed` on (40 seeds tried): the checks compare
    runs cut by max_tokens, not by where the planner ends a plan."""
    seeds = range(seed, seed + 40)
    found = next(running_prompts(engine, seeds, probe_id, tokens, **add), None)
    if found is None:
        raise AssertionError(f"the planner ends every looping prompt {seed}..{seed + 39} early")
    return found


def observation_ids() -> list[int]:
    text = load_language("drone").failure_observation("tc(180);", "blocked")
    encoded = load_tokenizer(PLANNER).encode(
        OBSERVATION_FORMAT.format(observation=text), add_special_tokens=False
    )
    return list(encoded.ids)


def run(engine: Engine, gen_id: int, steps: int | None = None) -> list[int]:
    """Step `gen_id` alone until it finishes (or `steps` tokens); its tokens."""
    tokens: list[int] = []
    for _ in range(10_000):
        if steps is not None and len(tokens) >= steps:
            return tokens
        for output in engine.step([gen_id]):
            tokens.append(output.token_id)
            if output.finished:
                return tokens
    raise AssertionError(f"generation {gen_id} did not finish")


def fresh(
    engine: Engine, gen_id: int, context: list[int], max_tokens: int, **add: Any
) -> list[int]:
    engine.add(gen_id, list(context), SamplingParams(max_tokens=max_tokens), **add)
    return run(engine, gen_id)


def check_rollback(engine: Backend, gen_id: int, prompt: list[int], **add: Any) -> VllmGeneration:
    """Generate 20, roll back to 14, resume: the rest is what a fresh generation on
    prompt + the 14 kept ids writes (and what the uninterrupted one wrote after
    them). Returns the generation's record (its `cached_history` for the caller)."""
    assert isinstance(engine, RewritableEngine)
    engine.add(gen_id, prompt, SamplingParams(max_tokens=MAX_TOKENS), **add)
    state = engine.generation(gen_id)
    generated = run(engine, gen_id, steps=20)
    engine.suspend(gen_id, HandlingStrategy.PRESERVE)
    engine.rewrite(gen_id, 14, [])
    kept = prompt + generated[:14]
    assert engine.token_ids(gen_id) == kept
    engine.resume(gen_id)
    after = run(engine, gen_id)
    assert after[:6] == generated[14:]  # greedy: the same again
    assert after == fresh(engine, gen_id + 1, kept, MAX_TOKENS - 14, **add)
    assert len(after) == MAX_TOKENS - 14  # no EOS: every id of the budget was written
    assert state.rewrites == 1 and state.appended_tokens == 0
    return state


def check_observation(
    engine: Backend, gen_id: int, prompt: list[int], strategy: HandlingStrategy, **add: Any
) -> VllmGeneration:
    """Generate 10, append the observation, resume: the rest is what a fresh
    generation on prompt + the 10 + the observation writes; the observation is never
    a step's output, and it counts towards max_tokens: the budget is set to end the
    generation one token before the model's own EOS after the observation (found
    first with fresh generations), which it reaches only if the observation's ids
    were not charged."""
    observation = observation_ids()
    first = fresh(engine, gen_id + 2, prompt, 10, **add)
    natural = fresh(engine, gen_id + 3, prompt + first + observation, MAX_TOKENS, **add)
    assert len(first) == 10 and len(natural) >= 2, "the planner ends too soon for this check"
    budget = len(natural) - 1
    engine.add(gen_id, prompt, SamplingParams(max_tokens=10 + len(observation) + budget), **add)
    state = engine.generation(gen_id)
    generated = run(engine, gen_id, steps=10)
    assert generated == first
    engine.suspend(gen_id, strategy)
    engine.rewrite(gen_id, 10, observation)
    context = prompt + generated + observation
    assert engine.token_ids(gen_id) == context
    engine.resume(gen_id)
    after = run(engine, gen_id, steps=1)
    assert engine.token_ids(gen_id) == context + after  # sampled after the observation
    after += run(engine, gen_id)
    assert after == natural[:budget]  # cut by max_tokens, the observation's ids charged
    assert after == fresh(engine, gen_id + 1, context, budget, **add)
    assert state.appended_tokens == len(observation)
    return state


def check_a_full_budget_of_appended_ids(engine: Backend, gen_id: int, prompt: list[int]) -> None:
    """Appended ids that use up max_tokens: one token is sampled after them, and it
    finishes the generation (as on the paged engines)."""
    engine.add(gen_id, prompt, SamplingParams(max_tokens=8))
    generated = run(engine, gen_id, steps=3)
    engine.suspend(gen_id, HandlingStrategy.DISCARD)
    appended = prompt[:5]
    engine.rewrite(gen_id, 3, appended)
    engine.resume(gen_id)
    [output] = engine.step([gen_id])
    assert output.finished
    assert [output.token_id] == fresh(engine, gen_id + 1, prompt + generated + appended, 1)


def check_errors(engine: Backend, gen_id: int, prompt: list[int], max_model_len: int) -> None:
    """The protocol's errors, each changing nothing; then a valid rewrite still works."""
    engine.add(gen_id, prompt, SamplingParams(max_tokens=MAX_TOKENS))
    generated = run(engine, gen_id, steps=2)
    with pytest.raises(EngineError, match=f"generation {gen_id} must be suspended"):
        engine.rewrite(gen_id, 1, [])
    engine.suspend(gen_id, HandlingStrategy.PRESERVE)
    with pytest.raises(ValueError, match=r"keep_generated=3 is outside \[0, 2\]"):
        engine.rewrite(gen_id, 3, [])
    with pytest.raises(ValueError, match=r"keep_generated=-1 is outside \[0, 2\]"):
        engine.rewrite(gen_id, -1, [])
    vocab = engine.vocab_size
    with pytest.raises(ValueError, match=rf"token {vocab} at index 1 is outside \[0, {vocab}\)"):
        engine.rewrite(gen_id, 1, [5, vocab])
    with pytest.raises(ValueError, match=r"token -1 at index 0 is outside"):
        engine.rewrite(gen_id, 1, [-1])
    with pytest.raises(EngineError, match=f"max_model_len is {max_model_len}"):
        engine.rewrite(gen_id, 2, [5] * (max_model_len - len(prompt) - 2))
    with pytest.raises(UnknownGeneration):
        engine.rewrite(gen_id + 100, 0, [])
    assert engine.token_ids(gen_id) == prompt + generated  # refused rewrites changed nothing
    assert engine.generation(gen_id).suspended
    engine.rewrite(gen_id, 0, [])  # back to the bare prompt
    engine.resume(gen_id)
    assert run(engine, gen_id) == fresh(engine, gen_id + 1, prompt, MAX_TOKENS)
