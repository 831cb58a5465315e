"""The contract between the policy layer and an inference backend.

The policy layer (queue, priorities, segmentation, handling strategies) decides
*who* runs; an `Engine` only obeys: it holds generations by id, runs one
iteration over the generations it is told to run, and reports tokens and memory.
The torch engine and the virtual-time simulator implement it (on the same paged-KV
books, paged_engine.py), so every policy runs unchanged on each.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable


class HandlingStrategy(str, Enum):
    """What happens to a suspended generation's KV cache (LAMPS / TimelyLLM §4.1)."""

    PRESERVE = "preserve"  # keep device blocks; resume costs nothing
    SWAP = "swap"  # copy blocks to the host pool, free device blocks; resume copies back
    # free blocks at once; resume reuses what the prefix cache still holds of them
    # and re-prefills the rest of prompt + generated ids
    DISCARD = "discard"
    # Resolved by the service per suspension, never passed to `Engine.suspend`:
    # the least predicted waste of the three above (LAMPS, scheduling/kv_strategy.py)
    AUTO = "auto"
    # preserve for a time-to-live from the reload cost and the queueing delay an
    # eviction would cause, then swap or discard (Continuum)
    TTL = "ttl"

    @property
    def is_fixed(self) -> bool:
        """Whether an engine can apply it directly (preserve, swap, discard)."""
        return self in FIXED_STRATEGIES


# what an engine applies; in this order, the cheapest in work first
FIXED_STRATEGIES = (HandlingStrategy.PRESERVE, HandlingStrategy.SWAP, HandlingStrategy.DISCARD)


@dataclass(frozen=True)
class SamplingParams:
    """Per-generation sampling. temperature 0 means greedy.

    `grammar`: an llguidance (Lark) grammar the generated tokens must follow, the
    prompt not included; the model's EOS is allowed only where the grammar may end,
    and stop tokens only where it allows them. Engines that cannot constrain
    decoding (the simulator, whose output is scripted) accept and ignore it.

    `close_within` (with a grammar): in a generation's last `close_within` tokens
    of `max_tokens`, it ends as soon as its grammar can end (EOS), and otherwise
    takes the first of `closing_ids` its grammar allows where it stands (a plan
    language's block end), so it finishes where the grammar may end instead of
    being cut off mid-statement at `max_tokens`. Other tokens are chosen as always.
    0 turns it off. In the window's last half `hard_closing_ids` join them (after
    `closing_ids`): ids that end an open name, call or statement (`closing.py`), so
    a statement that keeps going still ends in time. `closing_banned_ids`: ids a
    row in the window's hard half does not take while its grammar allows any other
    (those that open a new nested statement, such as a condition): a plan that
    must end now ends what is open and opens nothing new.

    `copy_names`, `copy_bias` (with a grammar): inside a name quoted by
    `copy_quote`, the tokens that go on spelling one of `copy_names` (the request's
    own names) get `copy_bias` added to their logits, so a name the request gives
    wins where the model is unsure (`copy_bias.py`); with `copy_openers`, only in a
    name whose opening quote comes right after one of them (a skill's name
    argument, not a free-text message). 0 or no names turns it off; engines without
    logits (the simulator) accept and ignore it.

    `copy_values`, `copy_value_openers` (with a grammar and `copy_bias`): the same
    for unquoted values, in pairs: right after `copy_value_openers[i]` (a skill's
    `(`, a later argument's `,`), the tokens that go on writing `copy_values[i]` as
    the tokenizer writes it (a number the request states, in the argument's unit)
    get the bias.

    `copy_distinct_after`, `copy_distinct_openers` (pairs, with the copy bias on
    names): a name opened right after `copy_distinct_openers[i]` gets no bias toward
    the name quoted right after `copy_distinct_after[i]` just before it, so a held
    object is not pushed to be placed on itself (`pk('cup');pl(`).

    `logprobs`: each `StepOutput` of the generation carries the log-probability of
    its token under the logits it was chosen from (copy bias included, before the
    grammar's mask), for engines that report them (`reports_logprobs`).

    `candidates`, `coverage_words` (for a `CandidateEngine`, `plan_candidates.py`):
    decode this many sampled alternatives beside the generation and keep the plan
    scoring best by log-probability and the words of `coverage_words` its quoted
    names use. 0: none; other engines ignore them."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int = 256
    stop_token_ids: tuple[int, ...] = ()  # in addition to the model's EOS
    grammar: str | None = None
    close_within: int = 0
    closing_ids: tuple[int, ...] = ()
    hard_closing_ids: tuple[int, ...] = ()
    closing_banned_ids: tuple[int, ...] = ()
    copy_names: tuple[str, ...] = ()
    copy_bias: float = 0.0
    copy_quote: str = "'"
    copy_openers: tuple[str, ...] = ()
    copy_values: tuple[str, ...] = ()
    copy_value_openers: tuple[str, ...] = ()
    copy_distinct_after: tuple[str, ...] = ()
    copy_distinct_openers: tuple[str, ...] = ()
    logprobs: bool = False
    candidates: int = 0
    coverage_words: tuple[str, ...] = ()


@dataclass(frozen=True)
class StepOutput:
    """One new token of one generation, produced by one `Engine.step`."""

    gen_id: int
    token_id: int
    finished: bool  # EOS, a stop token or max_tokens reached: the engine freed it
    logprob: float | None = None  # with `SamplingParams.logprobs`, where reported


@dataclass(frozen=True)
class MemoryReport:
    """KV memory in blocks; `*_free` counts blocks nobody holds."""

    block_size: int  # tokens per block
    bytes_per_block: int
    device_blocks_total: int
    device_blocks_free: int
    host_blocks_total: int
    host_blocks_free: int
    pinned_prefix_blocks: int


class EngineError(Exception):
    """Base of the engine's documented errors."""


class GenerationsFailed(EngineError):
    """Raised by `Engine.step` when some of the listed generations failed on their
    own (a request the backend refused, an error about that request alone), so that
    one robot's bad request never ends another's plan.

    `failures`: gen_id -> a one-line reason, for each failed generation; the engine
    has already ended them (as after `abort`: unknown to it from now on, their KV
    freed). `outputs`: what the step produced for the other generations, exactly as
    `step` would have returned it, to be processed as such (nothing is lost)."""

    def __init__(self, failures: dict[int, str], outputs: list[StepOutput]) -> None:
        self.failures = dict(failures)
        self.outputs = list(outputs)
        super().__init__(grouped_reasons(self.failures))


def grouped_reasons(failures: dict[int, str]) -> str:
    """Each distinct reason once, with the generations it ended: a step's error
    never stamps one generation's reason on all."""
    reasons: dict[str, list[int]] = {}
    for gen_id, reason in failures.items():
        reasons.setdefault(reason, []).append(gen_id)
    return "; ".join(
        f"{reason} (generation{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))})"
        for reason, ids in reasons.items()
    )


class OutOfKvMemory(EngineError):
    """Raised instead of admitting or resuming a generation the pool cannot hold."""


class UnknownGeneration(EngineError):
    """An operation named a generation id the engine does not hold."""


class UnknownVariant(EngineError):
    """A generation or prefix named a model variant (LoRA adapter) the engine does not
    serve."""


class AdapterError(ValueError):
    """The folder is not a LoRA adapter this engine can apply to its base model."""


@runtime_checkable
class Engine(Protocol):
    """One iteration-level inference backend.

    Generation ids are chosen by the caller and unique while the generation lives.
    A generation is *runnable* after `add` or `resume`, *suspended* after `suspend`,
    and gone after it finishes (a `StepOutput` with finished=True) or `abort`.
    """

    @property
    def eos_token_id(self) -> int: ...

    @property
    def max_generations(self) -> int:
        """Generations one `step` may run; a longer list is refused."""

    def set_ranking(self, gen_ids: list[int]) -> None:
        """The policy's current ranking of live generations, most urgent first.
        When KV memory runs short the engine preempts the least urgent first;
        generations the ranking does not name count as less urgent than all."""

    def register_prefix(self, prefix_id: str, token_ids: list[int]) -> None:
        """Prefill `token_ids` once and pin their KV blocks (Teola's partial
        prefill of a robot's fixed prompt). Re-registering an id replaces it."""

    def unregister_prefix(self, prefix_id: str) -> None: ...

    def can_admit(self, num_tokens: int, prefix_id: str | None = None) -> bool:
        """Whether a new generation whose prompt has `num_tokens` tokens (the prefix
        included) would fit in device KV memory now."""

    def add(
        self,
        gen_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prefix_id: str | None = None,
    ) -> None:
        """Admit a generation. If `prefix_id` is given, `prompt_token_ids` must start
        with that registered prefix; its KV is reused, not recomputed.
        Raises OutOfKvMemory if it cannot be held."""

    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        """Run one iteration (chunked prefill mixed with decodes, within the
        engine's token budget) over the given runnable generations, most urgent
        first (prefill budget goes in this order); return one output per
        generation that produced a token this iteration, in the same order.

        Raises GenerationsFailed when some generations failed on their own: they
        are ended, the others' outputs ride on the exception, and the caller ends
        only the failed ones. Any other EngineError concerns the whole step (a
        wrong call, or a backend that cannot go on)."""

    def suspend(self, gen_id: int, strategy: HandlingStrategy) -> None:
        """Stop scheduling `gen_id`, keeping its token ids; handle its KV by `strategy`."""

    def resume(self, gen_id: int) -> None:
        """Make a suspended generation runnable again (swap-in or re-prefill as its
        strategy requires). Raises OutOfKvMemory if it does not fit."""

    def abort(self, gen_id: int) -> None:
        """Forget `gen_id` and free all its KV at once (cancel)."""

    def token_ids(self, gen_id: int) -> list[int]:
        """Prompt + generated ids of a live generation."""

    def memory(self) -> MemoryReport: ...


@runtime_checkable
class RewritableEngine(Protocol):
    """An optional extension of `Engine` (plans that react, Conveyor's tools): the
    service may rewrite the text of a suspended generation. Backends that lack it
    are used without it (check with `isinstance(engine, RewritableEngine)`)."""

    def rewrite(
        self,
        gen_id: int,
        keep_generated: int,
        append_ids: list[int],
        observed: tuple[int, int] | None = None,
    ) -> None:
        """For a suspended generation: drop its generated ids past the first
        `keep_generated` (a rollback of text generated past a failed segment) and
        their KV, then append `append_ids` as input (never sampled, never returned
        by `step`; their KV is computed when it resumes, and they count towards
        `max_tokens`). It then samples after them. `observed` is the (start, end)
        of `append_ids` that is an observation (a tool's answer, a robot's
        failure): a grammar does not read it and goes on after it from the state
        the ids before it left (`observed.py`); the other appended ids are plan
        text the grammar reads. Raises EngineError if it is not suspended, or its
        grammar refuses the plan text appended; ValueError for a `keep_generated`
        outside [0, generated], ids outside the vocabulary, or an `observed` that
        is not a span of `append_ids`."""


@runtime_checkable
class ClosingEngine(Protocol):
    """Optional for an `Engine` that constrains decoding by grammars: the service may
    ask a generation to close now, as in its last `close_within` tokens (a plan
    statement about to outgrow the service's segment limit)."""

    def set_closing(self, gen_id: int, closing: bool, within: int | None = None) -> None:
        """While `closing`, the generation's next tokens end its grammar, or take its
        `closing_ids`, as soon as the grammar allows them, as in the last
        `close_within` tokens of its limit: its closing window starts now (its
        second half also takes `hard_closing_ids`, `closing.py`), `within` tokens
        long when that is fewer than `close_within` (the tokens left before the
        limit the caller closes for; None: `close_within`). False lifts it (the
        token limit's window still applies). Nothing changes for a generation
        without a grammar. Raises UnknownGeneration; ValueError for a `within`
        below 1."""


@runtime_checkable
class KvRehandling(Protocol):
    """Optional for an `Engine`: change a suspended generation's KV handling later
    (the service re-decides when a wait runs longer than predicted)."""

    def rehandle(self, gen_id: int, strategy: HandlingStrategy) -> bool:
        """Swap out or discard the device KV of suspended `gen_id` (swap or discard
        only: KV comes back before `resume` only by `KvPrefetching.prefetch`). False,
        changing nothing, when its KV is no longer on the device. Raises
        UnknownGeneration, EngineError."""


@runtime_checkable
class KvPrefetching(Protocol):
    """Optional for an `Engine`: bring a suspended generation's swapped-out KV back
    to the device before its `resume`, while device memory is free, so the resume
    does not pay the swap-in. The host copy stays valid until the generation runs
    again, so a prefetched KV is given up again (first, under any memory pressure)
    by freeing its device blocks, with no copy."""

    def prefetch_cost(self, gen_id: int) -> int | None:
        """Device blocks a prefetch of suspended `gen_id` would take; None when its KV
        is not on the host (nothing to prefetch). Raises UnknownGeneration."""

    def prefetch(self, gen_id: int) -> bool:
        """Copy suspended `gen_id`'s host KV to free device blocks, preempting nobody.
        False, changing nothing, when its KV is not on the host or too few blocks are
        free. Raises UnknownGeneration, EngineError (not suspended)."""

    def prefetch_counts(self) -> dict[str, int]:
        """Totals: `prefetches`, `prefetch_hits` (resumed with the prefetched KV on
        the device), `prefetch_given_up` (its device blocks freed again first)."""
