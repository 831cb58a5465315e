"""`lrtrace profile-engine`: measure a real engine's iteration cost and fit a profile.

We time `Engine.step` over controlled batch compositions (prefill-only steps of
several prompt lengths, decode steps of several batch sizes and context lengths,
and decodes mixed with a new prompt), then fit the linear model of
`lrtrace.profiles` by non-negative least squares. Each composition is timed
several times and the median kept, since the machine may be shared. The profile
records the fit's relative error so a user can judge it.
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
    out: list[StepSample] = []
    gens = [ids.gen_id() for _ in range(batch)]
    for g in gens:
        engine.add(g, ids.prompt(ctx), params)
    live = set(gens)
    pending = set(gens)
    while pending:  # prefill (possibly chunked), not timed
        for o in engine.step(sorted(live)):
            pending.discard(o.gen_id)
            if o.finished:
                live.discard(o.gen_id)
    # Consecutive decode steps differ by one token of context each: their median is one
    # sample (single steps are noisy on a shared CPU, the first after prefill most).
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
    if times:
        out.append(
            StepSample(
                0,
                int(statistics.median(sizes)),
                int(statistics.median(contexts)),
                statistics.median(times),
            )
        )
    if live:  # mixed: the same decodes plus one new prompt of 128 tokens
        context = sum(len(engine.token_ids(g)) for g in live) + 128
        new = ids.gen_id()
        engine.add(new, ids.prompt(128), params)
        seconds, _ = _timed_step(engine, [*sorted(live), new])
        out.append(StepSample(128, len(live), context, seconds))
        _discard(engine, new)
    for g in live:
        _discard(engine, g)
    return out


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
