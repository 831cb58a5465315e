"""One vLLM request's position in its plan grammar, for the grammar processor
(grammar_processor.py): a matcher that has taken the plan's ids in the request's
prompt (but its observations), then its output ids (vLLM's live list) as they come.

Taken ahead: a greedy row whose argmax the grammar allows takes that token at once
(`take_ahead`), since vLLM's greedy sampler takes that very token; the next step
finds it taken, so a token costs one matcher call instead of two (a check, then the
advance), the processor's main cost. A failed take leaves the matcher in error
(llguidance cannot roll back from there), and a step that brings another token (a
processor after this one moved the argmax) or none (a placeholder not yet filled)
leaves it one token off; either way the matcher is rebuilt from the ids it really
has, and the row checks before it advances from then on, so each row is rebuilt at
most once. The grammar states, and so every mask, are those of checking first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from timely_core.engine.closing import closing_ids_now
from timely_core.engine.copy_bias import CopyScan, copies
from timely_core.engine.observed import plan_ids
from timely_core.engine.torch.grammar import GrammarCompiler, GrammarMatcher
from timely_core.engine.vllm.grammar_args import GrammarArgs

log = logging.getLogger(__name__)

NONE = -1  # no token taken ahead


@dataclass
class RowStats:
    """Shared by a processor's rows."""

    rebuilt: int = 0  # matchers rebuilt after a token taken ahead did not come


class GrammarRow:
    """The matcher has taken the plan's ids in the prompt (`plan`), the first
    `consumed` of `output_ids`, and `ahead` when it is not NONE."""

    __slots__ = (
        "ahead",
        "args",
        "compiler",
        "consumed",
        "copy_scan",
        "generated",
        "greedy_unmasked",
        "matcher",
        "observed",
        "output_ids",
        "plan",
        "stats",
        "takes_ahead",
        "temperature",
    )

    def __init__(
        self,
        compiler: GrammarCompiler,
        args: GrammarArgs,
        plan: list[int],
        output_ids: list[int],
        temperature: float,
        greedy_unmasked: bool,
        stats: RowStats,
    ) -> None:
        """`greedy_unmasked`: greedy without penalties (vLLM applies those after the
        processors), so an allowed argmax is the token taken and needs no mask."""
        self.compiler = compiler
        self.args = args
        self.plan = plan
        self.output_ids = output_ids
        self.temperature = temperature
        self.greedy_unmasked = greedy_unmasked
        self.takes_ahead = greedy_unmasked
        self.consumed = 0
        self.ahead = NONE
        self.stats = stats
        # the plan's ids so far (grown in `advance`) and how far the copy bias has
        # counted quotes in them (copy_bias.CopyScan), for a row that copies
        self.generated = list(plan)
        self.copy_scan: CopyScan | None = None
        self.observed = args.observed_spans()  # read by the replays and the copy bias
        self.matcher = compiler.matcher(args.grammar)  # the engine compiled it in `add`
        refused = _replay(self.matcher, self.plan_text_ids)
        if refused is not None:  # the engine checks rewrites: never expected
            log.warning("grammar refused prompt token %d: %s", refused, self.matcher.error)

    @property
    def plan_text_ids(self) -> list[int]:
        """The plan's ids in the prompt that the grammar reads: its observations
        taken out (observed.py)."""
        return plan_ids(self.plan, self.observed)

    @property
    def copies(self) -> bool:
        """Whether its request carries a copy bias (copy_bias.py)."""
        return copies(self.args)

    @property
    def closers(self) -> tuple[int, ...] | None:
        """The ids its next token closes with, or None when it does not close
        (closing.py: asked to, or in the generation's last `close_within` tokens)."""
        args = self.args
        return closing_ids_now(
            max_tokens=args.max_tokens,
            close_within=args.close_within,
            closing_ids=args.closing_ids,
            hard_closing_ids=args.hard_closing_ids,
            generated=len(self.plan) + self.consumed,
            asked_at=args.closing_from if args.closing else None,
            asked_within=args.closing_within or None,
        )

    def advance(self, eos: int) -> None:
        """Take the output ids vLLM has filled in since the last step."""
        ids = self.output_ids
        while self.consumed < len(ids):
            token = ids[self.consumed]
            if token < 0:  # a placeholder of an asynchronous step, not filled yet
                break
            self.generated.append(token)
            if self.ahead != NONE:
                ahead, self.ahead = self.ahead, NONE
                if token == ahead:
                    self.consumed += 1
                    continue
                self._rebuild()  # it took a token that did not come
            if not self.matcher.accept(token) and token != eos:
                log.warning("grammar refused token %d: %s", token, self.matcher.error)
            self.consumed += 1
        if self.ahead != NONE:  # the step's token has not come
            self.ahead = NONE
            self._rebuild()

    def allows_argmax(self, token: int) -> bool:
        """For a greedy row without penalties whose argmax is `token` (not EOS):
        whether the grammar allows it, taken at once while the row takes ahead (and
        decodes: a partial prefill's argmax is dropped)."""
        if not self.takes_ahead or not self.output_ids:
            return self.matcher.allows(token)
        if self.matcher.accept(token):
            self.ahead = token
            return True
        self._rebuild()  # the refused token left the matcher in error
        return False

    def _rebuild(self) -> None:
        self.takes_ahead = False
        self.stats.rebuilt += 1
        self.matcher = self.compiler.matcher(self.args.grammar)
        _replay(self.matcher, self.plan_text_ids)
        _replay(self.matcher, self.output_ids[: self.consumed])


def _replay(matcher: GrammarMatcher, ids: Iterable[int]) -> int | None:
    """Accept `ids` in turn; the first one refused (the matcher then in error, where
    it stays whatever follows), or None."""
    for token in ids:
        if not matcher.accept(token):
            return token
    return None
