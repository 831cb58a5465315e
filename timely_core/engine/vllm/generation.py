"""What a vLLM backend keeps of one generation between vLLM requests.

vLLM cannot hold a request that does not run, so a suspended generation lives here
as token ids only; each time it runs again it becomes a new vLLM request (its
`submissions` numbers them) whose prompt is prompt + generated ids, and vLLM's prefix
cache restores the KV it still holds (`cached_tokens`). Shared by the in-process
engine and the server client."""

from __future__ import annotations

from dataclasses import dataclass, field

from timely_core.engine.protocol import EngineError, HandlingStrategy, SamplingParams

# Why grammars are refused on vLLM (docs: timely_core/engine/README.md, "vLLM")
GRAMMAR_REFUSED = (
    "grammar-constrained decoding is not available on the vLLM engines: vLLM's "
    "structured outputs see the planner tokenizer's digit place marks as text (its "
    "token-bytes view is the raw vocabulary, not what the detokenizer writes), and a "
    "resumed generation would restart the grammar at its continuation; set "
    "grammar: false or use engine: torch"
)


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

    @property
    def num_generated(self) -> int:
        return len(self.token_ids) - self.prompt_len

    @property
    def remaining_tokens(self) -> int:
        return self.params.max_tokens - self.num_generated

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
    if params.grammar is not None:
        raise EngineError(f"generation {gen_id}: {GRAMMAR_REFUSED}")
    if params.max_tokens < 1:
        raise EngineError(f"generation {gen_id}: max_tokens must be at least 1")


def priority_of(ranking: dict[int, int], gen_id: int) -> int:
    """vLLM priority from the policy's ranking: its place (0 most urgent); generations
    the ranking does not name after all of them."""
    return ranking.get(gen_id, len(ranking))
