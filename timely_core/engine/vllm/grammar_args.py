"""What a grammar-constrained generation tells vLLM with each of its requests.

vLLM sees a generation as a series of requests (each resume, park or failover is a
new one, its prompt = the original prompt + every id generated so far), so the
grammar processor inside vLLM (grammar_processor.py) is told where the plan starts
in the request's prompt: it replays the plan's ids from there and goes on from the
exact grammar state, a token straddling a statement boundary included. The token
budget and the closing window are the generation's, not the request's, so closing
counts over the generation's whole life.

The args travel as `SamplingParams.extra_args` in process and as `vllm_xargs` in an
OpenAI request body (flat keys, values str, int, float or lists of them, as vLLM's
API allows); the processor validates them with `GrammarArgs` (external input).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from timely_core.engine.copy_bias import check_copy_params
from timely_core.engine.observed import Span
from timely_core.engine.protocol import SamplingParams

# how vLLM loads the processor (`--logits-processors` on a server, engine args in process)
PROCESSOR_FQCN = "timely_core.engine.vllm.grammar_processor:GrammarLogitsProcessor"
PREFIX = "timely_"
KEYS = (
    "grammar",
    "plan_start",
    "plan_observed",
    "max_tokens",
    "close_within",
    "closing_ids",
    "hard_closing_ids",
    "closing_banned_ids",
    "closing",
    "closing_from",
    "closing_within",
    "copy_names",
    "copy_bias",
    "copy_quote",
    "copy_openers",
    "copy_values",
    "copy_value_openers",
    "copy_distinct_after",
    "copy_distinct_openers",
)


class GrammarArgs(BaseModel):
    """One request's grammar: the grammar text, where in the prompt the generated
    plan starts, and the generation's closing settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    grammar: str = Field(min_length=1)
    # index in the request's prompt of the plan's first generated (or appended) id
    plan_start: int = Field(ge=1)
    # the observations in the plan's ids (observed.py), flat: start, end, start, ...
    # from plan_start; the grammar does not read them
    plan_observed: tuple[int, ...] = ()
    max_tokens: int = Field(ge=1)  # the generation's budget (SamplingParams.max_tokens)
    close_within: int = Field(default=0, ge=0)
    closing_ids: tuple[int, ...] = ()
    hard_closing_ids: tuple[int, ...] = ()
    closing_banned_ids: tuple[int, ...] = ()
    closing: bool = False  # the service asked it to close (ClosingEngine.set_closing)
    # the generation's generated ids when it was asked: its closing window's start
    closing_from: int = Field(default=0, ge=0)
    # the tokens it had left then before the service's limit, its window's length
    # when fewer than close_within (0: close_within)
    closing_within: int = Field(default=0, ge=0)
    # the copy bias (copy_bias.py): the request's names, the bias, their quote, and
    # what comes right before a name's opening quote
    copy_names: tuple[str, ...] = ()
    copy_bias: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    copy_quote: str = Field(default="'", min_length=1, max_length=1)
    copy_openers: tuple[str, ...] = ()
    # numbers the request states, each after its opener (pairs)
    copy_values: tuple[str, ...] = ()
    copy_value_openers: tuple[str, ...] = ()
    # names that must differ from the name before them, in pairs
    copy_distinct_after: tuple[str, ...] = ()
    copy_distinct_openers: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _ids_not_negative(self) -> GrammarArgs:
        for name in ("closing_ids", "hard_closing_ids", "closing_banned_ids"):
            ids = getattr(self, name)
            if any(i < 0 for i in ids):
                raise ValueError(f"{name} must be token ids (>= 0), got {ids}")
        return self

    @model_validator(mode="after")
    def _observed_spans(self) -> GrammarArgs:
        flat = self.plan_observed
        if len(flat) % 2 or any(b < a for a, b in pairwise(flat)) or (flat and flat[0] < 0):
            raise ValueError(
                f"plan_observed must be sorted (start, end) pairs of offsets >= 0, got {flat}"
            )
        return self

    def observed_spans(self) -> list[Span]:
        """`plan_observed` as (start, end) spans."""
        flat = self.plan_observed
        return list(zip(flat[::2], flat[1::2], strict=True))

    @model_validator(mode="after")
    def _copy_settings(self) -> GrammarArgs:
        check_copy_params(self)  # as the engines check SamplingParams
        return self

    def wire(self) -> dict[str, Any]:
        """As `extra_args` / `vllm_xargs`: flat, prefixed keys."""
        values = self.model_dump()
        values["plan_observed"] = list(self.plan_observed)
        values["closing_ids"] = list(self.closing_ids)
        values["hard_closing_ids"] = list(self.hard_closing_ids)
        values["closing_banned_ids"] = list(self.closing_banned_ids)
        values["closing"] = int(self.closing)
        values["copy_names"] = list(self.copy_names)
        values["copy_openers"] = list(self.copy_openers)
        values["copy_values"] = list(self.copy_values)
        values["copy_value_openers"] = list(self.copy_value_openers)
        values["copy_distinct_after"] = list(self.copy_distinct_after)
        values["copy_distinct_openers"] = list(self.copy_distinct_openers)
        return {PREFIX + k: values[k] for k in KEYS}

    @staticmethod
    def read(extra_args: dict[str, Any] | None) -> GrammarArgs | None:
        """The args in a request's `extra_args`; None when it carries none (a request
        without a grammar); ValueError naming the field when they are malformed."""
        if not extra_args or PREFIX + "grammar" not in extra_args:
            return None
        values = {k: extra_args[PREFIX + k] for k in KEYS if PREFIX + k in extra_args}
        try:
            return GrammarArgs.model_validate(values)
        except ValidationError as exc:
            raise ValueError(f"Timely grammar arguments: {exc}") from None


def grammar_args(
    params: SamplingParams,
    prompt_len: int,
    closing: bool,
    closing_from: int = 0,
    observed: Sequence[Span] = (),
    closing_within: int | None = None,
) -> dict[str, Any] | None:
    """The wire args of a generation's next request (None without a grammar):
    `prompt_len` is the generation's own prompt length, where its plan starts in
    every request's prompt; `closing_from`, its generated ids when it was asked to
    close, and `closing_within` the tokens it then had left (None: a whole window);
    `observed`, the observations among its generated ids."""
    if params.grammar is None:
        return None
    return GrammarArgs(
        grammar=params.grammar,
        plan_start=prompt_len,
        plan_observed=tuple(i for span in observed for i in span),
        max_tokens=params.max_tokens,
        close_within=params.close_within,
        closing_ids=params.closing_ids,
        hard_closing_ids=params.hard_closing_ids,
        closing_banned_ids=params.closing_banned_ids,
        closing=closing,
        closing_from=closing_from,
        closing_within=closing_within or 0,
        copy_names=params.copy_names,
        copy_bias=params.copy_bias,
        copy_quote=params.copy_quote,
        copy_openers=params.copy_openers,
        copy_values=params.copy_values,
        copy_value_openers=params.copy_value_openers,
        copy_distinct_after=params.copy_distinct_after,
        copy_distinct_openers=params.copy_distinct_openers,
    ).wire()
