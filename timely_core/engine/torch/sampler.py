"""Next-token choice: greedy rows in one argmax, sampled rows with temperature,
nucleus (top-p) truncation and each generation's own `torch.Generator`, so a
seeded generation samples the same tokens whatever else shares its batch."""

from __future__ import annotations

import torch

from timely_core.engine.copy_bias import check_copy_params
from timely_core.engine.protocol import SamplingParams


def validate_params(params: SamplingParams) -> None:
    """Reject sampling parameters that cannot mean anything, naming the field."""
    if params.temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {params.temperature}")
    if not 0 < params.top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {params.top_p}")
    if params.max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {params.max_tokens}")
    if params.grammar is not None and not (isinstance(params.grammar, str) and params.grammar):
        raise ValueError("grammar must be None or a non-empty grammar text")
    if params.close_within < 0:
        raise ValueError(f"close_within must be >= 0, got {params.close_within}")
    check_copy_params(params)


def make_generator(params: SamplingParams) -> torch.Generator | None:
    """A private random stream for a sampled generation (None when greedy)."""
    if params.temperature == 0:
        return None
    generator = torch.Generator()
    if params.seed is None:
        generator.seed()
    else:
        generator.manual_seed(params.seed)
    return generator


def sample_row(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    """Sample one token from a [vocab] float32 row."""
    probs = torch.softmax(logits / params.temperature, dim=-1)
    if params.top_p < 1:
        sorted_probs, order = probs.sort(descending=True)
        before = sorted_probs.cumsum(0) - sorted_probs  # mass strictly above each token
        sorted_probs[before >= params.top_p] = 0  # the top token always survives
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return int(torch.multinomial(probs, 1, generator=generator).item())


def sample(
    logits: torch.Tensor,
    params: list[SamplingParams],
    generators: list[torch.Generator | None],
) -> list[int]:
    """One token per row of `logits` ([rows, vocab], float32)."""
    tokens = logits.argmax(dim=-1).tolist()
    for row, (p, generator) in enumerate(zip(params, generators, strict=True)):
        if p.temperature > 0 and generator is not None:
            tokens[row] = sample_row(logits[row], p, generator)
    return tokens
