"""Sampling under grammars: the rows of a step whose generation has a grammar get
its token mask on their logits before the token is chosen, greedy and sampled
alike; rows without one go through the plain sampler untouched.

Rows try the unmasked choice first (`unmasked_first`) and compute the mask only
when the grammar refuses it. A trained planner is right almost every token, so
this skips nearly all mask work, and it changes nothing: a greedy row's allowed
argmax is also the masked argmax; a sampled row's allowed draw x from p is kept,
a refused one redrawn from p masked to the allowed set A, so x comes out with
p(x) + (1 - p(A)) p(x) / p(A) = p(x) / p(A), the masked distribution. With top-p
below 1 the nucleus of the masked distribution differs, so those rows always take
the mask first.

In a closing row (its last `close_within` tokens of `SamplingParams`, or asked to
by the service; `closing.py` says which ids it closes with) the grammar's end is
taken as soon as it is allowed, else the first allowed closing id, before the
logits are consulted: the plan then ends, or its open blocks close, at a statement
boundary. Inside a statement the model's own (masked) choice goes on, so no
argument is cut short, until the window's last half, whose closing ids also end an
open name, call and statement, and the row takes none of its `closing_banned_ids`
(a new condition) while anything else is allowed; a chosen token that runs past a
statement's end
into the next (`;}?`) is cut back to its part that stops there (`;}`), when the
vocabulary spells that part as one token.

A matcher in an error state (never expected: a grammar past llguidance's limits,
or a token the mask did not allow) allows only EOS, as does a mask that allows
nothing: the plan then ends where it is, and the service reports the unfinished
plan. Both are counted (`dead_ends`) and logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
import torch

from timely_core.engine.closing import banned_now
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.grammar import GrammarMatcher
from timely_core.engine.torch.grammar_vocab import TokenBytes
from timely_core.engine.torch.sampler import sample_row

log = logging.getLogger(__name__)


class GrammarMasker:
    """Holds one step's bitmask buffer; `seconds` sums the time spent on grammar work
    (checks of the unmasked choice, masks, advancing matchers), not on sampling."""

    def __init__(self, max_rows: int, vocab_size: int, eos_id: int, unmasked_first: bool) -> None:
        """`vocab_size`: the width of the logits (the model's vocabulary)."""
        words = (vocab_size + 31) // 32
        self._bitmask = torch.zeros((max_rows, words), dtype=torch.int32)
        self._vocab = vocab_size
        self._eos = eos_id
        self.unmasked_first = unmasked_first
        self.seconds = 0.0
        self.masked_rows = 0  # rows whose mask was computed
        self.shortcut_rows = 0  # rows whose unmasked choice the grammar allowed as is
        self.dead_ends = 0  # masks that allowed nothing (EOS forced)
        self.closed_rows = 0  # tokens taken to end a generation within its limit
        self._ids_by_bytes: dict[bytes, int] | None = None
        self.vocab: TokenBytes | None = None

    def set_vocabulary(self, vocab: TokenBytes) -> None:
        """What each id spells (the grammar compiler's): closing cuts a token that
        runs past a statement's end back to one that stops there."""
        self.vocab = vocab
        self._ids_by_bytes = {}
        for token_id, spelled in enumerate(vocab.tokens):
            if token_id not in vocab.special:
                self._ids_by_bytes.setdefault(spelled, token_id)

    def sample(
        self,
        logits: torch.Tensor,
        params: Sequence[SamplingParams],
        generators: Sequence[torch.Generator | None],
        grammars: Sequence[GrammarMatcher | None],
        closing: Sequence[tuple[int, ...] | None] | None = None,
    ) -> list[int]:
        """One token per row of `logits` ([rows, vocab] float32, masked in place),
        each accepted by its row's grammar. `closing`: per row, None or the ids that
        close its grammar at the first chance, most preferred first (None: no row)."""
        tokens = logits.argmax(dim=-1).tolist()
        clock = time.perf_counter
        spent = 0.0  # grammar work only: what plain sampling would not do
        masked: list[int] = []
        rows = zip(params, generators, grammars, strict=True)
        for row, (p, generator, grammar) in enumerate(rows):
            if grammar is None:
                if p.temperature > 0 and generator is not None:
                    tokens[row] = sample_row(logits[row], p, generator)
                continue
            closers = None if closing is None else closing[row]
            if closers is not None:
                started = clock()
                closer = self.closing_token(grammar, closers)
                spent += clock() - started
                if closer is not None:
                    tokens[row] = closer
                    self.closed_rows += 1
                    continue
                masked.append(row)  # its choice is checked for a boundary inside it
                continue
            if self.unmasked_first and (p.temperature == 0 or p.top_p == 1):
                if p.temperature > 0 and generator is not None:
                    tokens[row] = sample_row(logits[row], p, generator)
                started = clock()
                kept = grammar.try_accept(tokens[row])
                spent += clock() - started
                if kept:
                    self.shortcut_rows += 1
                    continue
            masked.append(row)
        if masked:
            started = clock()
            self.mask_rows(logits, masked, grammars)
            if closing is not None:
                for row in masked:
                    closers = closing[row]
                    if closers is not None:
                        p = params[row]
                        banned = banned_now(closers, p.closing_ids, p.closing_banned_ids)
                        self.ban(logits, row, banned)
            spent += clock() - started
            for row in masked:
                p, generator, grammar = params[row], generators[row], grammars[row]
                assert grammar is not None
                if p.temperature > 0 and generator is not None:
                    token = sample_row(logits[row], p, generator)
                else:
                    token = int(logits[row].argmax())
                started = clock()
                closers = None if closing is None else closing[row]
                if closers is not None:
                    token = self.to_boundary(grammar, token, closers)
                if not grammar.accept(token) and token != self._eos:
                    log.warning("grammar refused token %d: %s", token, grammar.error)
                spent += clock() - started
                tokens[row] = token
        self.seconds += spent
        return tokens

    def closing_token(self, grammar: GrammarMatcher, closing_ids: Sequence[int]) -> int | None:
        """The token that ends the grammar, or closes what is open, if one may come
        next (the matcher advanced by it); None when neither may. A closing id counts
        only where the grammar may end or close again right after it: a quote that
        would open a name (`a(` + `'`) closes nothing."""
        if grammar.accepting and grammar.accept(self._eos):
            return self._eos
        for token_id in closing_ids:
            if grammar.allows(token_id) and _closes(grammar, token_id, closing_ids):
                grammar.accept(token_id)
                return token_id
        return None

    def to_boundary(self, grammar: GrammarMatcher, token: int, closing_ids: Sequence[int]) -> int:
        """`token`, or the token spelling its shortest start that reaches a point
        where the grammar may end or close (a token such as `;}?` runs past the end
        of a statement into the next one; closing stops at `;}`)."""
        if self._ids_by_bytes is None or self.vocab is None or token in self.vocab.special:
            return token  # EOS and other special tokens spell nothing to cut
        spelled = self.vocab.tokens[token]
        for end in range(1, len(spelled)):
            shorter = self._ids_by_bytes.get(spelled[:end])
            if shorter is None:
                continue
            if _closes(grammar, shorter, closing_ids):
                self.closed_rows += 1
                return shorter
        return token

    @staticmethod
    def ban(logits: torch.Tensor, row: int, banned: Sequence[int]) -> None:
        """A masked closing row: `banned` ids forbidden too, unless nothing else is
        allowed (then the grammar's own choice stands)."""
        if not banned:
            return
        index = torch.tensor(list(banned), dtype=torch.long, device=logits.device)
        kept = logits[row, index].clone()
        logits[row, index] = -torch.inf
        if not torch.isfinite(logits[row]).any():
            logits[row, index] = kept

    def mask_rows(
        self, logits: torch.Tensor, rows: list[int], grammars: Sequence[GrammarMatcher | None]
    ) -> None:
        """Set every logit the rows' grammars forbid to -inf."""
        for i, row in enumerate(rows):
            grammar = grammars[row]
            assert grammar is not None
            grammar.fill(self._bitmask, i)
        words = self._bitmask[: len(rows)].numpy()
        # one bit per token id, lowest bit first: a single C call unpacks them all
        allowed = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")[:, : self._vocab]
        for i, row in enumerate(rows):
            grammar = grammars[row]
            if not words[i].any() or (grammar is not None and grammar.failed):
                self.dead_ends += 1
                log.warning("grammar dead end (%s): the plan ends here", grammar and grammar.error)
                allowed[i] = 0
                allowed[i, self._eos] = 1
        # built on the host; moved only where the logits live elsewhere (vLLM on a GPU)
        forbidden = (torch.from_numpy(allowed) == 0).to(logits.device)
        first, last = rows[0], rows[-1]
        if last - first + 1 == len(rows):  # consecutive rows (the usual batch): a view
            logits[first : last + 1].masked_fill_(forbidden, -torch.inf)
        else:
            index = torch.tensor(rows, dtype=torch.long, device=logits.device)
            selected = logits.index_select(0, index).masked_fill_(forbidden, -torch.inf)
            logits.index_copy_(0, index, selected)
        self.masked_rows += len(rows)


def _closes(grammar: GrammarMatcher, token: int, closing_ids: Sequence[int]) -> bool:
    """Whether `token` may come next and the grammar may then end, or take a closing
    id (the matcher left as it was)."""
    probe = grammar.copy()
    return probe.try_accept(token) and (
        probe.accepting or any(probe.allows(c) for c in closing_ids)
    )
