"""What a generation's request tells a vLLM server: the /v1/completions bodies of
`VllmServerEngine` (server_engine.py).

Prompts are token ids, replies carry the sampled ids (`return_token_ids`), and
`priority` is the policy's ranking. A stream (the first, a resume
or a failover) sends prompt + every id received so far, so its `max_tokens`, seed
and grammar args are those of what the server has not sent yet
(`VllmGeneration.request_*`); a variant's request names its LoRA as the `model`.
"""

from __future__ import annotations

from typing import Any

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.vllm.generation import VllmGeneration
from timely_core.engine.vllm.server_router import ServerState


def completion_body(
    server: ServerState,
    prompt: list[int],
    max_tokens: int,
    params: SamplingParams,
    priority: int,
    stream: bool,
    seed: int | None = None,
    variant: str | None = None,
    grammar: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One /v1/completions request to `server`; a stream asks for its usage (the
    cached tokens) in its last chunk."""
    body: dict[str, Any] = {
        "model": variant or server.model,  # a LoRA is served under its own name
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "stop_token_ids": list(params.stop_token_ids),
        "priority": priority,
        "return_token_ids": True,
        "stream": stream,
    }
    if seed is not None:
        body["seed"] = seed
    if grammar is not None:
        body["vllm_xargs"] = grammar  # read by the servers' grammar processor
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def prefill_body(server: ServerState, token_ids: list[int], variant: str | None) -> dict[str, Any]:
    """A prefix prefilled on `server` (one token, not streamed; with `variant`'s
    LoRA), so the generations sent there find it in the server's prefix cache."""
    return completion_body(server, list(token_ids), 1, SamplingParams(), -1, False, variant=variant)


def stream_body(server: ServerState, state: VllmGeneration, kept: list[int]) -> dict[str, Any]:
    """The streamed request of `state` on `server`, from `kept` (prompt + every id
    received so far)."""
    # what the server has not sent yet (appended ids count, as in `VllmGeneration`)
    seed_state = VllmGeneration(state.gen_id, kept, state.prompt_len, state.params)
    seed_state.closing, seed_state.closing_from = state.closing, state.closing_from
    seed_state.closing_within = state.closing_within
    seed_state.observed = state.observed  # the grammar skips them on any server
    return completion_body(
        server,
        kept,
        seed_state.request_max_tokens,
        state.params,
        state.priority,
        True,
        seed_state.request_seed(),
        state.variant,
        seed_state.request_grammar(),
    )
