"""What a vLLM backend keeps of one generation between vLLM requests.

vLLM cannot hold a request that does not run, so a suspended generation lives here
as token ids only; each time it runs again it becomes a new vLLM request (its
`submissions` numbers them) whose prompt is prompt + generated ids, and vLLM's prefix
cache restores the KV it still holds (`cached_tokens`). Shared by the in-process
engine and the server client.

`rewrite` (plans that react) changes only these ids: the kept ones and the appended
ones become part of the next request's prompt, so vLLM samples after them and never
returns them, and its prefix cache restores what it still holds of the kept part.

Grammars: each request carries the generation's grammar args (grammar_args.py), so
vLLM's grammar processor (grammar_processor.py) continues the plan's grammar from
where the generation stands, whichever request it is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from timely_core.engine.closing import check_closing_within
from timely_core.engine.observed import Span, check_observed, plan_ids, rewritten_spans
from timely_core.engine.protocol import EngineError, HandlingStrategy, SamplingParams
from timely_core.engine.vllm.grammar_args import grammar_args


@dataclass
class VllmGeneration:
    gen_id: int
    token_ids: list[int]  # prompt + generated, as reported in StepOutputs
    prompt_len: int
    params: SamplingParams
    priority: int = 0  # vLLM priority of its current request (lower runs first)
    suspended: bool = False
    strategy: HandlingStrategy | None = None  # of the last suspension
    request_id: str | None = None  # the live vLLM request, None when it has none
    submissions: int = 0
    cached_tokens: int = 0  # vLLM's num_cached_tokens of the latest request
    cached_history: list[int] = field(default_factory=list)  # per request that ran
    cache_unreported: bool = False  # the latest request has not reported yet
    first_token_s: float | None = None  # monotonic time its first token arrived (servers)
    variant: str | None = None  # the LoRA adapter it runs with (None: the base model)
    # Ids appended as input by `rewrite` over its life (observations). They stay in
    # `token_ids` past the prompt like sampled ids, so `num_generated` counts them and
    # `remaining_tokens` charges them to `max_tokens`, as the protocol asks and the
    # paged engines' `Sequence` does; `keep_generated` indexes that same list.
    appended_tokens: int = 0
    # the observations among them, as spans of the ids past the prompt (observed.py)
    observed: list[Span] = field(default_factory=list)
    rewrites: int = 0
    closing: bool = False  # asked to close its grammar now (`ClosingEngine.set_closing`)
    closing_from: int = 0  # num_generated when it was asked (its closing window's start)
    closing_within: int | None = None  # tokens it had left then before the caller's limit

    @property
    def num_generated(self) -> int:
        """Ids past the prompt: sampled ones and ids appended by `rewrite`."""
        return len(self.token_ids) - self.prompt_len

    @property
    def remaining_tokens(self) -> int:
        return self.params.max_tokens - self.num_generated

    @property
    def request_max_tokens(self) -> int:
        """`max_tokens` of its next vLLM request. At least 1: appended ids may use up
        the budget, and then (as on the paged engines) it samples one token after
        them and finishes."""
        return max(1, self.remaining_tokens)

    def request_grammar(self) -> dict[str, Any] | None:
        """The grammar args of its next request (None without a grammar)."""
        return grammar_args(
            self.params,
            self.prompt_len,
            self.closing,
            self.closing_from,
            self.observed,
            self.closing_within,
        )

    def set_closing(self, closing: bool, within: int | None = None) -> bool:
        """Ask it to close (its closing window starting now, `within` tokens long when
        fewer than `close_within`) or lift that; whether its next request's grammar
        args change."""
        check_closing_within(within)
        changed = closing != self.closing
        if closing and changed:
            self.closing_from = self.num_generated
            self.closing_within = within
        self.closing = closing
        return changed and self.params.grammar is not None

    def next_request_id(self, serial: int) -> str:
        """A fresh id per submission (`serial` counts the backend's requests): an
        ended request's id is never reused, even by a later generation of this id."""
        self.submissions += 1
        return f"{self.gen_id}.{serial}"

    def request_seed(self) -> int | None:
        """The seed of the next submission. vLLM seeds a request's sampler once, so a
        resumed sampled generation draws from a new stream (seed + tokens so far):
        reproducible for the same suspensions, not equal to an uninterrupted run."""
        if self.params.seed is None:
            return None
        return self.params.seed + self.num_generated


def rewrite_generation(
    state: VllmGeneration,
    keep_generated: int,
    append_ids: list[int],
    observed: Span | None,
    vocab_size: int,
    max_model_len: int,
    check_generated: Callable[[list[int]], None] | None = None,
) -> None:
    """`RewritableEngine.rewrite` on a generation's ids (the caller found it by id and
    it holds no vLLM request while suspended). Checks everything before changing
    anything: EngineError if it is not suspended or would not fit `max_model_len`,
    or if `check_generated` (the grammar's check) refuses the ids past the prompt it
    would hold, its observations taken out; ValueError for `keep_generated` outside
    [0, generated], an id outside the vocabulary or an `observed` that is not a span
    of `append_ids`. The dropped ids' KV needs no freeing: a suspended generation holds
    no blocks, and those the prefix cache keeps are found by content only."""
    gen_id = state.gen_id
    if not state.suspended:
        raise EngineError(f"generation {gen_id} must be suspended to be rewritten")
    if not 0 <= keep_generated <= state.num_generated:
        raise ValueError(
            f"generation {gen_id}: keep_generated={keep_generated} is outside "
            f"[0, {state.num_generated}]"
        )
    bad = next((i for i, t in enumerate(append_ids) if not 0 <= int(t) < vocab_size), None)
    if bad is not None:
        raise ValueError(
            f"ids appended to generation {gen_id}: token {append_ids[bad]} at index {bad} "
            f"is outside [0, {vocab_size})"
        )
    check_observed(observed, len(append_ids), f"generation {gen_id}")
    spans = rewritten_spans(state.observed, keep_generated, observed)
    token_ids = state.token_ids[: state.prompt_len + keep_generated] + [int(t) for t in append_ids]
    if len(token_ids) >= max_model_len:
        raise EngineError(
            f"generation {gen_id} would hold {len(token_ids)} tokens after the rewrite; the "
            f"vLLM engine's max_model_len is {max_model_len}"
        )
    if check_generated is not None:
        check_generated(plan_ids(token_ids[state.prompt_len :], spans))
    state.token_ids = token_ids
    state.observed = spans
    state.appended_tokens += len(append_ids)
    state.rewrites += 1


def check_prefix_use(
    gen_id: int,
    prompt_token_ids: list[int],
    prefix_id: str,
    prefix: list[int] | None,
    prefix_variant: str | None,
    variant: str | None,
) -> None:
    """EngineError unless generation `gen_id` (of `variant`) may use registered prefix
    `prefix_id` (`prefix`: its ids, None if unregistered; `prefix_variant`: whose KV
    it holds)."""
    if prefix is None:
        raise EngineError(f"no registered prefix {prefix_id!r}")
    if list(prompt_token_ids[: len(prefix)]) != prefix:
        raise EngineError(f"prompt of generation {gen_id} does not start with prefix {prefix_id!r}")
    if prefix_variant != variant:
        raise EngineError(
            f"generation {gen_id} runs variant {variant or 'base'!r} but prefix "
            f"{prefix_id!r} holds the KV of variant {prefix_variant or 'base'!r}"
        )


def check_prompt(gen_id: int, token_ids: list[int], vocab_size: int, max_model_len: int) -> None:
    """Bad input, named, before vLLM sees it."""
    if not token_ids:
        raise EngineError(f"prompt of generation {gen_id} is empty")
    bad = next((t for t in token_ids if not 0 <= int(t) < vocab_size), None)
    if bad is not None:
        raise EngineError(
            f"prompt of generation {gen_id} has token id {bad}, outside the model's "
            f"vocabulary of {vocab_size}"
        )
    if len(token_ids) >= max_model_len:
        raise EngineError(
            f"prompt of generation {gen_id} has {len(token_ids)} tokens; the vLLM engine's "
            f"max_model_len is {max_model_len}"
        )


def check_params(gen_id: int, params: SamplingParams) -> None:
    if params.max_tokens < 1:
        raise EngineError(f"generation {gen_id}: max_tokens must be at least 1")


def priority_of(ranking: dict[int, int], gen_id: int) -> int:
    """vLLM priority from the policy's ranking: its place (0 most urgent); generations
    the ranking does not name after all of them."""
    return ranking.get(gen_id, len(ranking))
