"""Timely's plan grammars inside vLLM: a custom logits processor (vLLM v1's
`LogitsProcessor`), loaded by the in-process engine through its engine args and by
`vllm serve` with `--logits-processors` (grammar_args.PROCESSOR_FQCN).

Not vLLM's structured outputs, for two reasons: their token-bytes view is the raw
vocabulary, where the planner's digits carry place marks our detokenizer removes,
so the grammar would judge text nobody sees; and they start the grammar at each
request's first generated token, while Timely resumes a plan as a new request whose
prompt ends with the plan so far. This processor uses the torch engine's matcher
(the bytes each token adds to the decoded text, `grammar_vocab.py`) and starts each
request's matcher at the plan's start in its prompt (`GrammarArgs.plan_start`),
replaying the plan's ids, so a resumed, parked, rewritten or failed-over plan goes
on from the exact grammar state, a token straddling a statement boundary included.

Per row with grammar args: the matcher advances by each new output id (read in
`apply`, when vLLM has filled in the ids of the last step), then the logits the
grammar forbids become -inf, for greedy and sampled rows alike. A greedy row whose
argmax the grammar allows is left as it is (the torch engine's unmasked-first
shortcut: the masked argmax is that same token), unless the request has penalties,
which vLLM applies after the processors and which could move the argmax. In a closing row
(the generation's last `close_within` tokens, or asked to close) the grammar's end,
else the first closing id it allows, is the only token left; inside a statement the
masked choice goes on, and a token that would run past a statement's end is cut back
to the token that stops there (greedy: the masked argmax cut back, as the torch
engine does; sampled: each such token's probability moved onto its cut-back token,
the same distribution as drawing then cutting back). Rows without grammar args are
left untouched.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from vllm import SamplingParams as VllmSamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

from timely_core.engine.torch.grammar import GrammarMatcher
from timely_core.engine.torch.grammar_mask import GrammarMasker
from timely_core.engine.vllm.grammar_args import GrammarArgs
from timely_core.engine.vllm.grammar_checks import checkpoint_eos_ids, shared_compiler

if TYPE_CHECKING:
    from vllm.config import VllmConfig

log = logging.getLogger(__name__)

GREEDY_BELOW = 1e-5  # vLLM samples greedily below this temperature


@dataclass
class _Row:
    """One request's grammar position: the matcher has taken the plan's ids in the
    prompt and the first `consumed` of `output_ids` (vLLM's live list)."""

    args: GrammarArgs
    matcher: GrammarMatcher
    output_ids: list[int]
    before: int  # plan ids in the prompt (generated or appended by earlier requests)
    temperature: float
    shortcut: bool  # greedy without penalties: an allowed argmax needs no mask
    consumed: int = 0

    def advance(self, eos: int) -> None:
        for token in self.output_ids[self.consumed :]:
            if token < 0:  # a placeholder of an asynchronous step, not filled yet
                return
            if not self.matcher.accept(token) and token != eos:
                log.warning("grammar refused token %d: %s", token, self.matcher.error)
            self.consumed += 1

    @property
    def closing(self) -> bool:
        """Its next token closes: asked to, or in the generation's last `close_within`
        tokens (this one included)."""
        left = self.args.max_tokens - self.before - self.consumed
        return self.args.closing or left <= self.args.close_within


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks the rows of requests that carry Timely grammar args (grammar_args.py)."""

    @classmethod
    def validate_params(cls, sampling_params: VllmSamplingParams) -> None:
        """Malformed grammar args are refused (HTTP 400 on a server)."""
        GrammarArgs.read(sampling_params.extra_args)

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        model = vllm_config.model_config
        self._tokenizer_dir = Path(model.tokenizer)
        self._vocab_size = int(model.get_vocab_size())
        eos = checkpoint_eos_ids(self._tokenizer_dir)
        self._eos = eos[0] if eos else int(model.hf_config.eos_token_id)
        self._masker = GrammarMasker(
            vllm_config.scheduler_config.max_num_seqs, self._vocab_size, self._eos, False
        )
        self._rows: dict[int, _Row] = {}
        self.seconds = 0.0  # spent in `apply` on rows with a grammar (bench/grammar_vllm.py)
        self.masked_rows = 0  # rows whose mask was computed
        self.shortcut_rows = 0  # greedy rows whose argmax the grammar allowed as is

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token greedy decoding takes

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        process_dict_updates(self._rows, batch_update, self._new_row)

    def _new_row(
        self, params: VllmSamplingParams, prompt_ids: list[int] | None, output_ids: list[int]
    ) -> _Row | None:
        args = GrammarArgs.read(params.extra_args)
        if args is None:
            return None
        compiler = shared_compiler(self._tokenizer_dir, self._vocab_size)
        if self._masker.vocab is None:
            self._masker.set_vocabulary(compiler.vocab)
        matcher = compiler.matcher(args.grammar)  # the engine compiled it in `add`
        plan = list(prompt_ids or ())[args.plan_start :]
        for token in plan:
            if not matcher.accept(token):  # the engine checks rewrites: never expected
                log.warning("grammar refused prompt token %d: %s", token, matcher.error)
                break
        greedy = params.temperature < GREEDY_BELOW
        penalties = (
            params.repetition_penalty != 1.0
            or params.frequency_penalty != 0.0
            or params.presence_penalty != 0.0
        )
        return _Row(
            args, matcher, output_ids, len(plan), params.temperature, greedy and not penalties
        )

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self._rows:
            return logits
        started = time.perf_counter()
        grammars: list[GrammarMatcher | None] = [None] * logits.shape[0]
        masked: list[int] = []
        argmax: list[int] | None = None
        for index in sorted(self._rows):
            row = self._rows[index]
            row.advance(self._eos)
            grammars[index] = row.matcher
            if row.closing:
                closer = self._masker.closing_token(row.matcher.copy(), row.args.closing_ids)
                if closer is not None:
                    _force(logits, index, closer)
                    continue
            elif row.shortcut and not row.matcher.failed:
                if argmax is None:
                    argmax = logits.argmax(dim=-1).tolist()
                token = argmax[index]
                # (llguidance validates EOS only through `accepting`)
                if row.matcher.accepting if token == self._eos else row.matcher.allows(token):
                    self.shortcut_rows += 1
                    continue
            masked.append(index)
        if masked:
            self._masker.mask_rows(logits, masked, grammars)
            self.masked_rows += len(masked)
        for index in masked:
            row = self._rows[index]
            if row.closing:
                self._stop_at_boundary(logits, index, row)
        self.seconds += time.perf_counter() - started
        return logits

    def _stop_at_boundary(self, logits: torch.Tensor, index: int, row: _Row) -> None:
        """Inside a statement while closing: a token running past the statement's end
        is cut back to the token that stops there (`GrammarMasker.to_boundary`)."""
        closers = row.args.closing_ids
        if row.temperature < GREEDY_BELOW:  # greedy: the masked argmax, cut back
            token = int(logits[index].argmax())
            cut = self._masker.to_boundary(row.matcher, token, closers)
            if cut != token:
                _force(logits, index, cut)
            return
        allowed = torch.isfinite(logits[index]).nonzero().flatten().tolist()
        moves = [(t, self._masker.to_boundary(row.matcher, t, closers)) for t in allowed]
        move_probability(logits[index], [(t, c) for t, c in moves if c != t], row.temperature)


def _force(logits: torch.Tensor, index: int, token: int) -> None:
    """Only `token` may come next in row `index`."""
    logits[index].fill_(-math.inf)
    logits[index, token] = 0.0


def move_probability(
    row: torch.Tensor, moves: Sequence[tuple[int, int]], temperature: float
) -> None:
    """For each (token, target): add token's probability at `temperature` (vLLM
    divides the logits by it after the processors) to target's, and forbid token."""
    for token, target in moves:
        merged = torch.logaddexp(row[target] / temperature, row[token] / temperature)
        row[target] = merged * temperature
        row[token] = -math.inf
