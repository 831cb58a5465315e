"""Whether a vLLM server runs Timely's grammar processor, asked of the server itself.

A server started without `--logits-processors` (grammar_args.PROCESSOR_FQCN)
ignores the grammar args of a request and would decode unconstrained, so the
client probes each server once before sending it a grammar: one greedy token under
a grammar that allows only its end (EOS), with EOS's logit pushed down by
`logit_bias`. Only a server whose processor masks the row answers EOS; any other
answers some other token. Deterministic either way, and one decode step.
"""

from __future__ import annotations

from typing import Any

from timely_core.engine.vllm.grammar_args import PROCESSOR_FQCN, GrammarArgs

PROBE_GRAMMAR = 'start: ""'  # nothing but the end: EOS is the one token allowed
PROBE_BIAS = -100.0  # EOS's logit unmasked: never the argmax


def probe_body(model: str, eos_id: int, prompt_id: int) -> dict[str, Any]:
    """The /v1/completions body of the probe (one token after `prompt_id`)."""
    args = GrammarArgs(grammar=PROBE_GRAMMAR, plan_start=1, max_tokens=1)
    return {
        "model": model,
        "prompt": [prompt_id],
        "max_tokens": 1,
        "temperature": 0.0,
        "logit_bias": {str(eos_id): PROBE_BIAS},
        "return_token_ids": True,
        "vllm_xargs": args.wire(),
    }


def answered_by_processor(reply: Any, eos_id: int) -> bool:
    """Whether the probe's reply (JSON) is the masked answer, EOS."""
    choices = reply.get("choices") or [{}]
    return list(choices[0].get("token_ids") or []) == [eos_id]


def missing_processor(url: str) -> str:
    return (
        f"vLLM server {url} does not run Timely's grammar processor, so it would decode "
        f"grammar requests unconstrained: start it with --logits-processors "
        f"{PROCESSOR_FQCN} (timely_core/engine/README.md, vLLM), or set grammar: false"
    )
