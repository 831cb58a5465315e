"""`lrtrace profile-engine`: measure a real engine's iteration cost and fit a profile.

We time `Engine.step` over controlled batch compositions, then fit the linear model
of `lrtrace.profiles` by non-negative least squares. Each composition is timed
several times and the median kept, since the machine may be shared. The profile
records the fit's relative error so a user can judge it.

Two regimes, because one linear model does not fit both:
- the served one (`prefix_tokens` > 0): every prompt starts with a registered
  prefix of that length, as robot prompts do in the service: request prefills of a
  few dozen tokens that attend over the whole prefix, decodes in batches up to the
  service's cap that share the prefix's blocks, and both mixed. On a CPU engine the
  prefix dominates: a 48-token request costs as much as 15-20 decodes in a batch,
  and sharing makes a decode's context far cheaper than a private one's. A profile
  fitted on fresh prompts predicted this machine overloaded at a load it served.
- fresh prompts (`prefix_tokens` 0): prefill-only steps of several prompt lengths,
  decode steps of several batch sizes and context lengths, decodes mixed with a new
  prompt; for engines serving prompts without shared prefixes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lrtrace.profiles import LatencyProfile
from timely_core.engine.protocol import Engine, SamplingParams, StepOutput, UnknownGeneration


@dataclass(frozen=True)
class StepSample:
    prefill_tokens: int
    decodes: int
    context_tokens: int
    seconds: float

    def features(self) -> list[float]:
        return [1.0, self.prefill_tokens, self.decodes, self.context_tokens]


@dataclass(frozen=True)
class ProfilePlan:
    prefill_lengths: tuple[int, ...] = (32, 128, 256, 512)
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    contexts: tuple[int, ...] = (256, 1280)  # the robots' prompts are ~1k tokens
    repeats: int = 5
    decode_steps: int = 3
    prefix_tokens: int = 0  # > 0: profile the served regime (see the module docstring)
    request_tokens: int = 48  # the per-request part of a prompt after the prefix
    served_prefill_batches: tuple[int, ...] = (1, 2, 4, 8)
    served_decode_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32)


class _Ids:
    def __init__(self, vocab: int, seed: int, avoid: Sequence[int]) -> None:
        self._rng = np.random.default_rng(seed)
        self._vocab = vocab
        self._avoid = set(avoid)
        self._next_gen = 1

    def prompt(self, n: int) -> list[int]:
        ids = self._rng.integers(4, self._vocab, n).tolist()
        return [i if i not in self._avoid else 5 for i in ids]

    def gen_id(self) -> int:
        self._next_gen += 1
        return self._next_gen


def _discard(engine: Engine, gen_id: int) -> None:
    """Abort a generation unless it already finished (the engine freed it then)."""
    try:
        engine.abort(gen_id)
    except UnknownGeneration:
        return


def _timed_step(engine: Engine, gen_ids: list[int]) -> tuple[float, list[StepOutput]]:
    start = time.perf_counter()
    outputs = engine.step(gen_ids)
    return time.perf_counter() - start, outputs


def measure(
    engine: Engine, vocab_size: int, plan: ProfilePlan, progress: Callable[[str], None]
) -> list[StepSample]:
    """Median step time per composition; the engine is left empty afterwards.
    `context_tokens` counts the KV entries of every generation in the step after it
    (prompt tokens for a prefill, the whole sequence for a decode), as the
    SimulatedEngine charges them."""
    ids = _Ids(vocab_size, 0, (engine.eos_token_id,))
    # Random sampling keeps generations going (greedy on random ids may hit EOS early);
    # a generation that still ends early is simply not counted in the next decode step.
    params = SamplingParams(temperature=1.0, seed=0, max_tokens=4096)
    if plan.prefix_tokens > 0:
        return _served_samples(engine, ids, params, plan, progress)
    samples: list[StepSample] = []

    for length in plan.prefill_lengths:
        progress(f"prefill {length}")
        times = []
        for _ in range(plan.repeats):
            g = ids.gen_id()
            engine.add(g, ids.prompt(length), params)
            times.append(_timed_step(engine, [g])[0])
            _discard(engine, g)
        samples.append(StepSample(length, 0, length, statistics.median(times)))

    for ctx in plan.contexts:
        for batch in plan.batch_sizes:
            progress(f"decode batch {batch} context {ctx}")
            samples.extend(_decode_samples(engine, ids, params, plan, batch, ctx))
    return samples


def _decode_samples(
    engine: Engine, ids: _Ids, params: SamplingParams, plan: ProfilePlan, batch: int, ctx: int
) -> list[StepSample]:
    def add(length: int) -> int:
        g = ids.gen_id()
        engine.add(g, ids.prompt(length), params)
        return g

    # mixed: the same decodes plus one new prompt of 128 tokens
    return _timed_decodes(engine, [add(ctx) for _ in range(batch)], plan, lambda: add(128))


PROFILE_PREFIX_ID = "lrtrace-profile"


def _served_samples(
    engine: Engine,
    ids: _Ids,
    params: SamplingParams,
    plan: ProfilePlan,
    progress: Callable[[str], None],
) -> list[StepSample]:
    """Compositions of the served regime: prompts = a registered prefix + a request.
    Prefill tokens are what the engine computes beyond the prefix's KV it reuses (the
    request, with TorchEngine), as the SimulatedEngine charges them."""
    prefix = ids.prompt(plan.prefix_tokens)
    engine.register_prefix(PROFILE_PREFIX_ID, prefix)
    prompt_len = plan.prefix_tokens + plan.request_tokens

    def add() -> int:
        g = ids.gen_id()
        engine.add(g, prefix + ids.prompt(plan.request_tokens), params, PROFILE_PREFIX_ID)
        return g

    samples: list[StepSample] = []
    try:
        for batch in plan.served_prefill_batches:
            progress(f"prefill of {batch} requests after a {plan.prefix_tokens}-token prefix")
            times = []
            computed = 0
            for _ in range(plan.repeats):
                gens = [add() for _ in range(batch)]
                computed = sum(prompt_len - _computed(engine, g) for g in gens)
                times.append(_timed_step(engine, gens)[0])
                for g in gens:
                    _discard(engine, g)
            samples.append(StepSample(computed, 0, batch * prompt_len, statistics.median(times)))
        for batch in plan.served_decode_batches:
            progress(f"decode batch {batch} sharing the prefix")
            samples.extend(_timed_decodes(engine, [add() for _ in range(batch)], plan, add))
    finally:
        engine.unregister_prefix(PROFILE_PREFIX_ID)
    return samples


def _timed_decodes(
    engine: Engine, gens: list[int], plan: ProfilePlan, add_one: Callable[[], int]
) -> list[StepSample]:
    """Prefill `gens` (untimed; chunked if need be), then a decode sample (the median
    of consecutive steps, which differ by one token of context each: single steps are
    noisy on a shared CPU, the first after prefill most) and a mixed one (the decodes
    plus `add_one()`'s prefill); every generation is discarded afterwards."""
    live = set(gens)
    pending = set(gens)
    while pending:
        for o in engine.step(sorted(live)):
            pending.discard(o.gen_id)
            if o.finished:
                live.discard(o.gen_id)
    times: list[float] = []
    contexts: list[int] = []
    sizes: list[int] = []
    for _ in range(max(plan.decode_steps, plan.repeats)):
        if not live:
            break
        contexts.append(sum(len(engine.token_ids(g)) for g in live))
        sizes.append(len(live))
        seconds, outs = _timed_step(engine, sorted(live))
        times.append(seconds)
        live -= {o.gen_id for o in outs if o.finished}
    out: list[StepSample] = []
    if times:
        out.append(
            StepSample(
                0,
                int(statistics.median(sizes)),
                int(statistics.median(contexts)),
                statistics.median(times),
            )
        )
    if live:
        new = add_one()
        pending_tokens = len(engine.token_ids(new)) - _computed(engine, new)
        context = sum(len(engine.token_ids(g)) for g in live) + len(engine.token_ids(new))
        seconds, _ = _timed_step(engine, [*sorted(live), new])
        out.append(StepSample(pending_tokens, len(live), context, seconds))
        _discard(engine, new)
    for g in live:
        _discard(engine, g)
    return out


def _computed(engine: Engine, gen_id: int) -> int:
    """Tokens of `gen_id` whose KV the engine already holds (a shared prefix's blocks)."""
    state = getattr(engine, "generation", None)
    if state is None:
        return 0
    return int(state(gen_id).num_computed)


def fit(samples: Sequence[StepSample]) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative least squares (active set by elimination: a coefficient that comes
    out negative is fixed at 0 and the rest refitted). Returns (coefficients,
    relative errors per sample)."""
    x = np.array([s.features() for s in samples], dtype=float)
    y = np.array([s.seconds for s in samples], dtype=float)
    active = list(range(x.shape[1]))
    coef = np.zeros(x.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(x[:, active], y, rcond=None)
        if (sol >= 0).all():
            coef[:] = 0
            coef[active] = sol
            break
        active.pop(int(np.argmin(sol)))
    rel = np.abs(x @ coef - y) / np.maximum(y, 1e-9)
    return coef, rel


def profile_from(
    name: str,
    description: str,
    samples: Sequence[StepSample],
    kv_capacity_tokens: int,
    max_batched_tokens: int,
) -> LatencyProfile:
    coef, rel = fit(samples)
    return LatencyProfile(
        name=name,
        description=description,
        source="measured",
        iteration_s=float(coef[0]),
        prefill_token_s=float(coef[1]),
        decode_s=float(coef[2]),
        context_token_s=float(coef[3]),
        kv_capacity_tokens=kv_capacity_tokens,
        max_batched_tokens=max_batched_tokens,
        derivation=(
            f"lrtrace profile-engine: {len(samples)} step compositions (median of repeats), "
            "non-negative least squares on [1, prefill tokens, decodes, context tokens]"
        ),
        samples=len(samples),
        rel_error_p50=float(np.percentile(rel, 50)),
        rel_error_p95=float(np.percentile(rel, 95)),
    )
