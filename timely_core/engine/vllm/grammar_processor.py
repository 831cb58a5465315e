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

Per row with grammar args (grammar_row.py): the matcher advances by each new output
id (read in `apply`, when vLLM has filled in the ids of the last step), then the
logits the grammar forbids become -inf, for greedy and sampled rows alike. A greedy
row whose argmax the grammar allows is left as it is (the torch engine's
unmasked-first shortcut: the masked argmax is that same token), its matcher taking
that token at once, unless the request has penalties, which vLLM applies after the
processors and which could move the argmax. In a closing row
(the generation's last `close_within` tokens, or asked to close; `closing.py` says
which ids it closes with, the same rule as the torch engine's) the grammar's end,
else the first closing id it allows, is the only token left; inside a statement the
masked choice goes on, and a token that would run past a statement's end is cut back
to the token that stops there (greedy: the masked argmax cut back, as the torch
engine does; sampled: each such token's probability moved onto its cut-back token,
the same distribution as drawing then cutting back). Before all that, a row with a
copy bias gets it on the ids that go on spelling one of its request's names
(`copy_bias.py`, as in the torch engine). Rows without grammar args are left
untouched.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from vllm import SamplingParams as VllmSamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

from timely_core.engine.closing import banned_now
from timely_core.engine.copy_bias import CopyBias, copies
from timely_core.engine.torch.grammar import GrammarMatcher
from timely_core.engine.torch.grammar_mask import GrammarMasker
from timely_core.engine.vllm.grammar_args import GrammarArgs
from timely_core.engine.vllm.grammar_checks import checkpoint_eos_ids, shared_compiler
from timely_core.engine.vllm.grammar_row import GrammarRow, RowStats

if TYPE_CHECKING:
    from vllm.config import VllmConfig

log = logging.getLogger(__name__)

GREEDY_BELOW = 1e-5  # vLLM samples greedily below this temperature


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
        self._rows: dict[int, GrammarRow] = {}
        self._copy_bias: CopyBias | None = None
        self.row_stats = RowStats()  # shared by its rows
        self.seconds = 0.0  # spent in `apply` on rows with a grammar (bench/grammar_vllm.py)
        self.masked_rows = 0  # rows whose mask was computed
        self.shortcut_rows = 0  # greedy rows whose argmax the grammar allowed as is

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token greedy decoding takes

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        process_dict_updates(self._rows, batch_update, self._new_row)

    def _new_row(
        self, params: VllmSamplingParams, prompt_ids: list[int] | None, output_ids: list[int]
    ) -> GrammarRow | None:
        args = GrammarArgs.read(params.extra_args)
        if args is None:
            return None
        compiler = shared_compiler(self._tokenizer_dir, self._vocab_size)
        if self._masker.vocab is None:
            self._masker.set_vocabulary(compiler.vocab)
        if self._copy_bias is None and copies(args):
            self._copy_bias = CopyBias(compiler.vocab, compiler.encode)
        greedy = params.temperature < GREEDY_BELOW
        penalties = (
            params.repetition_penalty != 1.0
            or params.frequency_penalty != 0.0
            or params.presence_penalty != 0.0
        )
        plan = list(prompt_ids or ())[args.plan_start :]
        return GrammarRow(
            compiler,
            args,
            plan,
            output_ids,
            params.temperature,
            greedy and not penalties,
            self.row_stats,
        )

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        rows = self._rows
        if not rows:
            return logits
        started = time.perf_counter()
        eos = self._eos
        masked: list[int] = []
        closing: dict[int, tuple[int, ...]] = {}  # masked rows that close, with their ids
        argmax: list[int] | None = None
        kept = 0
        for row in rows.values():
            row.advance(eos)
        if self._copy_bias is not None:
            self._add_copy_bias(logits, self._copy_bias)
        for index, row in rows.items():
            matcher = row.matcher
            closers = row.closers
            if closers is not None:
                closer = self._masker.closing_token(matcher.copy(), closers)
                if closer is not None:
                    _force(logits, index, closer)
                    continue
                closing[index] = closers
            elif row.greedy_unmasked:
                if argmax is None:
                    argmax = row_argmax(logits)
                token = argmax[index]
                # (llguidance validates EOS only through `accepting`; a failed matcher
                # allows nothing, so its row is masked: EOS only)
                if matcher.accepting if token == eos else row.allows_argmax(token):
                    kept += 1
                    continue
            masked.append(index)
        self.shortcut_rows += kept
        if masked:
            self._mask(logits, sorted(masked), closing)
        self.seconds += time.perf_counter() - started
        return logits

    def _add_copy_bias(self, logits: torch.Tensor, bias: CopyBias) -> None:
        """Each copying row's bias on the ids that go on spelling one of its names,
        its quotes counted only in the ids it took since the last step."""
        started = time.perf_counter()
        boosts = []
        for index, row in self._rows.items():
            if row.copies:
                ids, row.copy_scan = bias.boosted_scan(
                    row.generated, 0, row.args, row.copy_scan, row.observed
                )
                boosts.append((index, ids, row.args.copy_bias))
        bias.seconds += time.perf_counter() - started
        if boosts:
            bias.add(logits, boosts)

    def _mask(
        self, logits: torch.Tensor, masked: list[int], closing: dict[int, tuple[int, ...]]
    ) -> None:
        grammars: list[GrammarMatcher | None] = [None] * logits.shape[0]
        for index in masked:
            grammars[index] = self._rows[index].matcher
        self._masker.mask_rows(logits, masked, grammars)
        self.masked_rows += len(masked)
        for index, closers in closing.items():
            args = self._rows[index].args
            banned = banned_now(closers, args.closing_ids, args.closing_banned_ids)
            self._masker.ban(logits, index, banned)
            self._stop_at_boundary(logits, index, self._rows[index], closers)

    def _stop_at_boundary(
        self, logits: torch.Tensor, index: int, row: GrammarRow, closers: tuple[int, ...]
    ) -> None:
        """Inside a statement while closing: a token running past the statement's end
        is cut back to the token that stops there (`GrammarMasker.to_boundary`)."""
        if row.temperature < GREEDY_BELOW:  # greedy: the masked argmax, cut back
            token = int(logits[index].argmax())
            cut = self._masker.to_boundary(row.matcher, token, closers)
            if cut != token:
                _force(logits, index, cut)
            return
        allowed = torch.isfinite(logits[index]).nonzero().flatten().tolist()
        moves = [(t, self._masker.to_boundary(row.matcher, t, closers)) for t in allowed]
        move_probability(logits[index], [(t, c) for t, c in moves if c != t], row.temperature)


def row_argmax(logits: torch.Tensor) -> list[int]:
    """Each row's argmax, the first of ties, as vLLM's greedy sampler takes it. On the
    host numpy's argmax is used: torch's costs several times more on a batch of
    short rows (timely_core/engine/README.md, vLLM)."""
    if logits.device.type == "cpu" and logits.dtype == torch.float32:
        return list(logits.numpy().argmax(axis=1).tolist())
    return list(logits.argmax(dim=-1).tolist())


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
