"""What to do with a waiting generation's KV: the three waste equations of LAMPS
(from INFERCEPT), the min-waste choice (`auto`), Continuum's time-to-live (`ttl`)
and LAMPS's memory-over-time score, all on the engine's own costs.

Waste is memory held idle or spent again, in byte-seconds, for a generation of
`C_i` tokens of its own KV (the pinned prompt prefix stays either way, so it is
not counted) beside `C_other` tokens of the running batch, waiting `T_INT`:

- preserve: `T_INT * C_i * M` (its blocks sit unused)
- discard:  `T_fwd(C_i) * C_i * M + T_fwd(C_i) * C_other * M` (recompute; the batch
  waits through it)
- swap:     `2 * T_swap(C_i) * C_batch * M` (out and back in; the batch waits)

`T_fwd` and `T_swap` come from the engine (`KvCostSource`): the simulator's
`LatencyModel`, a measured profile for the torch engine, and a vLLM backend's own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from timely_core.engine.protocol import FIXED_STRATEGIES, HandlingStrategy
from timely_core.engine.sim.latency import LatencyKvCosts, LatencyModel

PRESERVE, SWAP, DISCARD = HandlingStrategy.PRESERVE, HandlingStrategy.SWAP, HandlingStrategy.DISCARD
FIXED = FIXED_STRATEGIES  # ties go to the earlier: keeping costs no work
MIN_WAIT_CV = 0.05  # the spread of a wait is never taken as exact


class KvCostModel(Protocol):
    """An engine's costs of handling KV, as the waste equations need them."""

    @property
    def bytes_per_token(self) -> float: ...

    def forward_s(self, tokens: int) -> float:
        """T_fwd(C): seconds an iteration gains by recomputing `tokens` tokens of KV."""

    def swap_s(self, tokens: int) -> float:
        """T_swap(C): seconds to copy `tokens` tokens of KV one way."""


@runtime_checkable
class KvCostSource(Protocol):
    """Optional for an `Engine`: its own costs. Engines without it are costed by the
    service's fallback profile (`kv_costs_for`)."""

    def kv_costs(self) -> KvCostModel: ...


def kv_costs_for(engine: object, fallback: LatencyModel, bytes_per_token: float) -> KvCostModel:
    """The engine's own costs if it states them, else `fallback` at its KV size."""
    if isinstance(engine, KvCostSource):
        return engine.kv_costs()
    return LatencyKvCosts(fallback, bytes_per_token)


@dataclass(frozen=True)
class Waste:
    """Byte-seconds each strategy wastes on one wait."""

    preserve: float
    swap: float
    discard: float

    def of(self, strategy: HandlingStrategy) -> float:
        return {PRESERVE: self.preserve, SWAP: self.swap, DISCARD: self.discard}[strategy]

    def least(self, allowed: Iterable[HandlingStrategy] = FIXED) -> HandlingStrategy:
        """The min-waste strategy among `allowed` (ties: preserve, then swap)."""
        options = [s for s in FIXED if s in set(allowed)]
        if not options:
            raise ValueError("no fixed strategy allowed")
        return min(options, key=self.of)  # min keeps the first of equals


def waste(costs: KvCostModel, context_tokens: int, other_tokens: int, wait_s: float) -> Waste:
    """The three equations for `context_tokens` (C_i) beside `other_tokens` (C_other)
    waiting `wait_s` (T_INT)."""
    if context_tokens < 0 or other_tokens < 0:
        raise ValueError(f"token counts must be >= 0, got {context_tokens}, {other_tokens}")
    c_i, c_other, m = context_tokens, other_tokens, costs.bytes_per_token
    t_fwd = costs.forward_s(c_i)
    return Waste(
        preserve=max(wait_s, 0.0) * c_i * m,
        swap=2.0 * costs.swap_s(c_i) * (c_i + c_other) * m,
        discard=t_fwd * c_i * m + t_fwd * c_other * m,
    )


def ttl_s(
    costs: KvCostModel,
    context_tokens: int,
    other_tokens: int,
    wait_s: float,
    wait_cv: float,
    queue_delay_s: float,
) -> float:
    """Continuum's time-to-live: how long to pin the KV of a generation whose wait is
    about `wait_s` (normal, spread `wait_cv` x `wait_s`). Pinning for tau costs
    E[min(T, tau)] x C_i x M; it pays back, with probability P(T <= tau), the cheaper
    eviction's waste plus the queueing delay an evicted generation meets on return
    (the batch's memory idle that long: `queue_delay_s` x C_batch x M). The best
    tau of a grid around the wait; 0 when no pinning pays."""
    m = costs.bytes_per_token
    w = waste(costs, context_tokens, other_tokens, wait_s)
    evict = min(w.swap, w.discard) + max(queue_delay_s, 0.0) * (context_tokens + other_tokens) * m
    mu = max(wait_s, 0.0)
    sigma = max(wait_cv, MIN_WAIT_CV) * mu
    best_tau, best_gain = 0.0, 0.0
    for k in (-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0):
        tau = mu + k * sigma
        if tau <= 0:
            continue
        p, held = _normal_cdf_and_capped_mean(mu, sigma, tau)
        gain = p * evict - held * context_tokens * m
        if gain > best_gain:
            best_tau, best_gain = tau, gain
    return best_tau


def _normal_cdf_and_capped_mean(mu: float, sigma: float, tau: float) -> tuple[float, float]:
    """P(T <= tau) and E[min(T, tau)] for T ~ N(mu, sigma) (sigma 0: T = mu)."""
    if sigma <= 0:
        return (1.0 if mu <= tau else 0.0), min(mu, tau)
    z = (tau - mu) / sigma
    cdf = 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))
    pdf = math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return cdf, mu * cdf - sigma * pdf + tau * (1.0 - cdf)


def memory_time(
    costs: KvCostModel,
    context_tokens: int,
    new_tokens: int,
    token_s: float,
    wait_s: float,
    strategy: HandlingStrategy,
    other_tokens: int = 0,
) -> float:
    """LAMPS's score: the integral of a generation's memory over time, in byte-seconds,
    for its next `new_tokens` tokens (about `token_s` each, the context growing from
    `context_tokens`) and the wait after them under `strategy`."""
    m = costs.bytes_per_token
    decode = new_tokens * token_s * (context_tokens + new_tokens / 2.0) * m
    after = waste(costs, context_tokens + new_tokens, other_tokens, wait_s)
    return decode + after.of(strategy)
