"""The grammar side of the vLLM engines, outside vLLM: the checkpoint's grammar
compiler (the torch engine's `GrammarCompiler`, one per tokenizer per process,
shared with the grammar processor when vLLM runs in process), and the checks a
grammar request passes before vLLM sees it.

Inside vLLM a grammar that does not compile, or a prompt the grammar refuses,
could only end the plan at once (the processor cannot raise without stopping
vLLM's whole batch), so both are refused here, naming the generation: a grammar
that does not compile in `add`, an observation the grammar refuses in `rewrite`
(as the torch engine does when it rebuilds its matcher).
"""

from __future__ import annotations

import json
import threading
from functools import cache
from pathlib import Path

from timely_core.engine.protocol import EngineError, SamplingParams
from timely_core.engine.torch.grammar import GrammarCompiler

_lock = threading.Lock()


def checkpoint_eos_ids(model_path: Path) -> tuple[int, ...]:
    """The model's EOS ids: config.json's, then generation_config.json's (as the
    torch engine reads them)."""
    ids: list[int] = []
    for name in ("config.json", "generation_config.json"):
        path = model_path / name
        if not path.is_file():
            continue
        eos = json.loads(path.read_text()).get("eos_token_id")
        for token_id in eos if isinstance(eos, list) else [] if eos is None else [eos]:
            if int(token_id) not in ids:
                ids.append(int(token_id))
    return tuple(ids)


def shared_compiler(tokenizer_dir: Path, vocab_size: int) -> GrammarCompiler:
    """The grammar compiler of the checkpoint in `tokenizer_dir` (its tokenizer.json),
    built once per process: each grammar text compiles once, whoever asks."""
    with _lock:
        return _compiler(tokenizer_dir.resolve(), vocab_size)


@cache
def _compiler(tokenizer_dir: Path, vocab_size: int) -> GrammarCompiler:
    eos = checkpoint_eos_ids(tokenizer_dir)
    return GrammarCompiler.from_checkpoint(tokenizer_dir, vocab_size, eos)


class GrammarChecks:
    """A vLLM engine's checks of grammar requests (the compiler read on first use)."""

    def __init__(self, model_path: Path, vocab_size: int) -> None:
        self._model_path = model_path
        self._vocab_size = vocab_size

    @property
    def compiler(self) -> GrammarCompiler:
        return shared_compiler(self._model_path, self._vocab_size)

    def check_add(self, gen_id: int, params: SamplingParams) -> None:
        """ValueError naming the generation and the field: a grammar that does not
        compile, `close_within` below 0, closing ids outside the vocabulary."""
        if params.grammar is None:
            return
        if params.close_within < 0:
            raise ValueError(
                f"generation {gen_id}: close_within must be >= 0, got {params.close_within}"
            )
        for name in ("closing_ids", "hard_closing_ids", "closing_banned_ids"):
            bad = [i for i in getattr(params, name) if not 0 <= i < self._vocab_size]
            if bad:
                raise ValueError(
                    f"generation {gen_id}: {name} {bad} are outside [0, {self._vocab_size})"
                )
        try:
            self.compiler.matcher(params.grammar)
        except ValueError as exc:
            raise ValueError(f"generation {gen_id}: {exc}") from None

    def check_rewrite(self, gen_id: int, params: SamplingParams, generated: list[int]) -> None:
        """EngineError unless the grammar accepts the generated ids a rewrite leaves
        (kept + appended, its observations taken out: observed.py), from the plan's
        start."""
        if params.grammar is None:
            return
        try:
            self.compiler.rebuilt(params.grammar, generated)
        except EngineError as exc:
            raise EngineError(f"generation {gen_id}: {exc}") from None
