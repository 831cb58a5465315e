"""Plan candidates: a generation decoded several ways, the best kept.

A small planner often knows the right plan but does not decode it greedily: asked
"any chance you could look for the spare batteries" beside a shelf, the shipped
planner writes `o('shelf');a('shelf');tp();`, while one of eight sampled plans is
`o('spare batteries');tp();`. `CandidateEngine` wraps an engine that reports log-probabilities
and, for a generation whose `SamplingParams.candidates` is n > 0, decodes it as
given (greedy, as a rule) beside n sampled alternatives in the same batches (the
prompt's prefix shared in the engine's cache). When all have ended it keeps the one
with the highest

    log-probability (under the logits it was decoded from, copy bias included)
    + coverage_weight * (words of `coverage_words` quoted in the plan)

the second term the coverage reward of neural machine translation's beam search
(GNMT), here for the names a request gives. Plans cut off by `max_tokens` lose to
plans that ended; plans `accept` refuses are left out, and with none left the
generation is decoded again on its own. The kept plan's tokens are
then handed out one per `step` (no compute left), so the service segments,
suspends and resumes it as any other; it holds no KV by then, so `rewrite` refuses
it and the service admits it again from its kept ids.

The cost is the alternatives' decoding: n + 1 generations' work per plan, and the
first token only once they all have ended. Off unless a generation asks for it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from timely_core.engine.protocol import (
    Engine,
    EngineError,
    GenerationsFailed,
    HandlingStrategy,
    OutOfKvMemory,
    SamplingParams,
    StepOutput,
)


def candidate_seed(seed: int | None, prompt: list[int], k: int) -> int:
    """The seed of a generation's k-th alternative: from its own seed, else from its
    prompt, so the same request samples the same alternatives whenever it comes."""
    return hash((hash(tuple(prompt)) if seed is None else seed, k)) & 0x7FFFFFFF


@dataclass
class _Candidate:
    ids: list[int] = field(default_factory=list)
    logprob: float = 0.0
    finished: bool = False


@dataclass
class _Deciding:
    """A generation whose candidates are being decoded."""

    prompt: list[int]
    params: SamplingParams
    prefix_id: str | None
    variant: str | None
    candidates: dict[int, _Candidate]  # engine id -> state; its own id first
    suspended: bool = False
    failure: str | None = None  # why its own candidate failed (the engine ended it)

    def live(self) -> list[int]:
        return [i for i, c in self.candidates.items() if not c.finished]


@dataclass
class _Chosen:
    """The kept plan, handed out one token per step."""

    prompt: list[int]
    ids: list[int]
    handed: int = 0
    suspended: bool = False


def _without_eos(ids: list[int], eos: int) -> list[int]:
    return ids[:-1] if ids and ids[-1] == eos else ids


@dataclass(frozen=True)
class CandidateChoice:
    """What one generation chose, for statistics and tests."""

    gen_id: int
    candidates: int  # decoded, its own included
    acceptable: int  # of them, those `accept` let be kept
    chosen_own: bool  # the generation's own plan was kept (or decoded again)
    redecoded: bool  # none was acceptable: decoded again on its own


class CandidateEngine:
    """An `Engine` that decodes plan candidates (module docstring) for generations
    that ask for them and passes everything else to `inner`.

    `decode`: token ids to text (the service's tokenizer); `temperature`: the
    alternatives' sampling temperature; `coverage_weight`: the reward per covered
    word, in log-probability units; `accept(gen_id, ids)`: whether a candidate plan
    (EOS left out) may be kept, e.g. each statement within the service's segment
    limit, which candidates decoded ahead cannot be closed for. When none may, the
    generation is decoded again on its own, as without candidates."""

    def __init__(
        self,
        inner: Engine,
        decode: Callable[[list[int]], str],
        temperature: float = 1.0,
        coverage_weight: float = 64.0,
        accept: Callable[[int, list[int]], bool] | None = None,
    ) -> None:
        if not getattr(inner, "reports_logprobs", False):
            raise EngineError(
                f"plan candidates need an engine that reports log-probabilities; "
                f"{type(inner).__name__} does not (the torch engine does)"
            )
        if temperature <= 0:
            raise ValueError(f"candidate temperature must be > 0, got {temperature}")
        if coverage_weight < 0:
            raise ValueError(f"coverage weight must be >= 0, got {coverage_weight}")
        self.inner = inner
        self._decode = decode
        self.temperature = temperature
        self.coverage_weight = coverage_weight
        self.accept = accept
        self._deciding: dict[int, _Deciding] = {}
        self._chosen: dict[int, _Chosen] = {}
        self._owner: dict[int, int] = {}  # an alternative's engine id -> its generation
        self._ids = itertools.count(-1, -1)  # engine ids of alternatives: never a caller's
        self.choices: deque[CandidateChoice] = deque(maxlen=256)  # the latest
        # plans decided, kept among the alternatives, decoded again (none acceptable)
        self.counts: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        # memory, prefixes, variants, costs and statistics are the inner engine's
        return getattr(self.inner, name)

    @property
    def eos_token_id(self) -> int:
        return self.inner.eos_token_id

    @property
    def max_generations(self) -> int:
        return self.inner.max_generations

    # ---- admission -------------------------------------------------------
    def add(
        self,
        gen_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prefix_id: str | None = None,
        variant: str | None = None,
    ) -> None:
        if gen_id < 0:
            raise ValueError(f"generation ids must be >= 0 (negative: alternatives), got {gen_id}")
        if gen_id in self._deciding or gen_id in self._chosen:
            raise EngineError(f"generation {gen_id} is already live")
        if params.candidates <= 0:
            self._add(gen_id, prompt_token_ids, params, prefix_id, variant)
            return
        own = dataclasses.replace(params, candidates=0, logprobs=True)
        self._add(gen_id, prompt_token_ids, own, prefix_id, variant)
        candidates = {gen_id: _Candidate()}
        for k in range(params.candidates):
            other = next(self._ids)
            seed = candidate_seed(params.seed, prompt_token_ids, k)
            sampled = dataclasses.replace(own, temperature=self.temperature, seed=seed)
            try:
                self._add(other, prompt_token_ids, sampled, prefix_id, variant)
            except OutOfKvMemory:
                break  # fewer alternatives, not no plan
            candidates[other] = _Candidate()
            self._owner[other] = gen_id
        self._deciding[gen_id] = _Deciding(
            list(prompt_token_ids), params, prefix_id, variant, candidates
        )

    def _add(
        self,
        gen_id: int,
        prompt: list[int],
        params: SamplingParams,
        prefix_id: str | None,
        variant: str | None,
    ) -> None:
        if variant is None:
            self.inner.add(gen_id, prompt, params, prefix_id)
        else:  # a variant-serving engine (`VariantEngine`)
            self.inner.add(gen_id, prompt, params, prefix_id, variant=variant)  # type: ignore[call-arg]

    # ---- iteration -------------------------------------------------------
    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        # most urgent first, each generation with all its candidates, up to what the
        # engine runs: the first deciding one always decodes (no candidate waits on
        # a batch full of others' own), less urgent ones wait a step
        batch: list[int] = []
        for gen_id in gen_ids:
            deciding = self._deciding.get(gen_id)
            if deciding is not None and deciding.suspended:
                raise EngineError(f"generation {gen_id} is suspended; resume it first")
            batch += self._engine_ids(gen_id)[: self.inner.max_generations - len(batch)]
        failures: dict[int, str] = {}
        try:
            outputs = self.inner.step(batch) if batch else []
        except GenerationsFailed as exc:  # ended by the inner engine: map them to owners
            outputs = exc.outputs
            failures = self._failed(exc.failures)
        passed: dict[int, StepOutput] = {}
        for output in outputs:
            owner = self._owner.get(output.gen_id, output.gen_id)
            deciding = self._deciding.get(owner)
            if deciding is None:
                passed[output.gen_id] = output
                continue
            candidate = deciding.candidates[output.gen_id]
            candidate.ids.append(output.token_id)
            candidate.logprob += output.logprob or 0.0
            candidate.finished = output.finished
            if output.finished and output.gen_id != owner:
                del self._owner[output.gen_id]
        for gen_id in gen_ids:
            deciding = self._deciding.get(gen_id)
            if deciding is not None and not deciding.live():
                self._choose(gen_id, deciding)
            chosen = self._chosen.get(gen_id)
            if chosen is not None:
                passed[gen_id] = self._hand_out(gen_id, chosen)
        produced = [passed[g] for g in gen_ids if g in passed]
        if failures:
            raise GenerationsFailed(failures, produced)
        return produced

    def _failed(self, failures: dict[int, str]) -> dict[int, str]:
        """The callers' generations that failed, from the inner engine's failed ids:
        an alternative that failed is one candidate fewer; a generation fails once
        none of its candidates is left, with its own candidate's reason if it has one
        (an alternative's names an id the caller never saw)."""
        failed: dict[int, str] = {}
        for engine_id, reason in failures.items():
            owner = self._owner.pop(engine_id, engine_id)
            deciding = self._deciding.get(owner)
            if deciding is None:
                failed[owner] = reason
                continue
            deciding.candidates.pop(engine_id, None)
            if engine_id == owner:
                deciding.failure = reason
            if not deciding.candidates:
                del self._deciding[owner]
                failed[owner] = deciding.failure or reason
        return failed

    def _choose(self, gen_id: int, deciding: _Deciding) -> None:
        del self._deciding[gen_id]
        limit = deciding.params.max_tokens
        scored = []
        for engine_id, candidate in deciding.candidates.items():
            ids = _without_eos(candidate.ids, self.eos_token_id)
            if self.accept is not None and not self.accept(gen_id, ids):
                continue
            ended = len(candidate.ids) < limit or len(ids) < len(candidate.ids)
            score = candidate.logprob + self.coverage_weight * self._covered(ids, deciding.params)
            scored.append((ended, score, engine_id == gen_id, candidate))
        count = len(deciding.candidates)
        if not scored:  # decoded again as if it had asked for no candidates
            own = dataclasses.replace(deciding.params, candidates=0)
            try:
                self._add(gen_id, deciding.prompt, own, deciding.prefix_id, deciding.variant)
            except EngineError:  # no room or no prefix now: its own plan, as decoded
                kept = deciding.candidates.get(gen_id) or next(iter(deciding.candidates.values()))
                self._chosen[gen_id] = _Chosen(deciding.prompt, kept.ids)
            self._record(CandidateChoice(gen_id, count, 0, True, True))
            return
        # ended first, then the score; a tie keeps the generation's own plan
        best = max(scored, key=lambda s: (s[0], s[1], s[2]))
        self._chosen[gen_id] = _Chosen(deciding.prompt, best[3].ids)
        self._record(CandidateChoice(gen_id, count, len(scored), best[2], False))

    def _record(self, choice: CandidateChoice) -> None:
        self.choices.append(choice)
        self.counts["plans"] += 1
        self.counts["alternatives_kept"] += not choice.chosen_own
        self.counts["redecoded"] += choice.redecoded

    def _covered(self, ids: list[int], params: SamplingParams) -> int:
        """Words of `params.coverage_words` among the words of the plan's quoted texts."""
        if not params.coverage_words:
            return 0
        quoted = self._decode(ids).split(params.copy_quote)[1::2]
        words = {w for text in quoted for w in text.lower().split()}
        return len(words & set(params.coverage_words))

    def _hand_out(self, gen_id: int, chosen: _Chosen) -> StepOutput:
        if chosen.suspended:
            raise EngineError(f"generation {gen_id} is suspended; resume it first")
        token = chosen.ids[chosen.handed]
        chosen.handed += 1
        finished = chosen.handed == len(chosen.ids)
        if finished:
            del self._chosen[gen_id]
        return StepOutput(gen_id, token, finished)

    # ---- ranking and waiting ---------------------------------------------
    def set_ranking(self, gen_ids: list[int]) -> None:
        """Every generation's own ahead of all alternatives: short of memory, the
        engine preempts alternatives first."""
        own: list[int] = []
        others: list[int] = []
        for gen_id in gen_ids:
            ids = self._engine_ids(gen_id)
            own += ids[:1]
            others += ids[1:]
        self.inner.set_ranking(own + others)

    def _engine_ids(self, gen_id: int) -> list[int]:
        """What runs in the inner engine for `gen_id`: its live candidates (its own
        first), nothing for a kept plan being handed out, else itself."""
        deciding = self._deciding.get(gen_id)
        if deciding is not None:
            return deciding.live()
        return [] if gen_id in self._chosen else [gen_id]

    def suspend(self, gen_id: int, strategy: HandlingStrategy) -> None:
        deciding = self._deciding.get(gen_id)
        if deciding is not None:
            for engine_id in deciding.live():
                self.inner.suspend(engine_id, strategy)
            deciding.suspended = True
        elif gen_id in self._chosen:
            self._chosen[gen_id].suspended = True  # nothing held: nothing to keep
        else:
            self.inner.suspend(gen_id, strategy)

    def resume(self, gen_id: int) -> None:
        deciding = self._deciding.get(gen_id)
        if deciding is not None:
            live = deciding.live()
            self.inner.resume(live[0])  # its own: OutOfKvMemory leaves it suspended
            for engine_id in live[1:]:
                try:
                    self.inner.resume(engine_id)
                except OutOfKvMemory:  # one alternative fewer
                    self._drop(deciding, engine_id)
            deciding.suspended = False
        elif gen_id in self._chosen:
            self._chosen[gen_id].suspended = False
        else:
            self.inner.resume(gen_id)

    def abort(self, gen_id: int) -> None:
        deciding = self._deciding.pop(gen_id, None)
        if deciding is not None:
            for engine_id in deciding.live():
                self.inner.abort(engine_id)
                self._owner.pop(engine_id, None)
        elif self._chosen.pop(gen_id, None) is None:
            self.inner.abort(gen_id)

    def _drop(self, deciding: _Deciding, engine_id: int) -> None:
        self.inner.abort(engine_id)
        del deciding.candidates[engine_id]
        self._owner.pop(engine_id, None)

    def token_ids(self, gen_id: int) -> list[int]:
        deciding = self._deciding.get(gen_id)
        if deciding is not None:
            return list(deciding.prompt)  # nothing handed out yet
        chosen = self._chosen.get(gen_id)
        if chosen is not None:
            return chosen.prompt + chosen.ids[: chosen.handed]
        return self.inner.token_ids(gen_id)

    # ---- the optional protocols, for the inner engine's generations -------
    def rewrite(
        self,
        gen_id: int,
        keep_generated: int,
        append_ids: list[int],
        observed: tuple[int, int] | None = None,
    ) -> None:
        if gen_id in self._deciding or gen_id in self._chosen:
            raise EngineError(
                f"generation {gen_id} was chosen among plan candidates and holds no KV "
                "to rewrite; admit it again with its kept ids"
            )
        self.inner.rewrite(gen_id, keep_generated, append_ids, observed)  # type: ignore[attr-defined]

    def set_closing(self, gen_id: int, closing: bool, within: int | None = None) -> None:
        deciding = self._deciding.get(gen_id)
        if deciding is not None:
            for engine_id in deciding.live():
                self.inner.set_closing(engine_id, closing, within)  # type: ignore[attr-defined]
        elif gen_id not in self._chosen:
            self.inner.set_closing(gen_id, closing, within)  # type: ignore[attr-defined]

    def rehandle(self, gen_id: int, strategy: HandlingStrategy) -> bool:
        deciding = self._deciding.get(gen_id)
        if deciding is not None:
            changed = [self.inner.rehandle(i, strategy) for i in deciding.live()]  # type: ignore[attr-defined]
            return any(changed)
        if gen_id in self._chosen:
            return False
        return bool(self.inner.rehandle(gen_id, strategy))  # type: ignore[attr-defined]

    def prefetch_cost(self, gen_id: int) -> int | None:
        if gen_id in self._chosen:
            return None
        deciding = self._deciding.get(gen_id)
        if deciding is None:
            cost: int | None = self.inner.prefetch_cost(gen_id)  # type: ignore[attr-defined]
            return cost
        costs = [self.inner.prefetch_cost(i) for i in deciding.live()]  # type: ignore[attr-defined]
        known = [c for c in costs if c is not None]
        return sum(known) if known else None

    def prefetch(self, gen_id: int) -> bool:
        if gen_id in self._chosen:
            return False
        deciding = self._deciding.get(gen_id)
        if deciding is None:
            return bool(self.inner.prefetch(gen_id))  # type: ignore[attr-defined]
        return any([self.inner.prefetch(i) for i in deciding.live()])  # type: ignore[attr-defined]
