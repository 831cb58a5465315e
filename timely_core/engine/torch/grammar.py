"""Grammar-constrained decoding with llguidance: a grammar text is compiled once per
tokenizer (a matcher template), and each generation gets its own matcher, a copy
of it (about a microsecond), advanced with every token the generation keeps.

The matcher lives in the generation's engine state (`Sequence.grammar`), beside
its token ids, and nothing but a kept token moves it: suspension, swap, discard
and preemption handle KV only, so a resumed or re-prefilled generation samples its
next token from exactly the state it left. `rebuilt` replays kept ids into a fresh
matcher when a state must be recreated elsewhere.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import llguidance
import torch
from tokenizers import Tokenizer

from timely_core.engine.protocol import EngineError
from timely_core.engine.torch.grammar_vocab import TokenBytes, token_bytes


class GrammarMatcher:
    """One generation's position in its grammar."""

    __slots__ = ("_matcher",)

    def __init__(self, matcher: llguidance.LLMatcher) -> None:
        self._matcher = matcher

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the allowed next tokens into `bitmask[row]` (int32, one bit per id)."""
        target = bitmask[row]
        self._matcher.unsafe_compute_mask_ptr(target.data_ptr(), target.numel() * 4)

    def try_accept(self, token_id: int) -> bool:
        """Advance by `token_id` if the grammar allows it; else stay (no error)."""
        return self._matcher.try_consume_tokens([token_id]) == 1

    def accept(self, token_id: int) -> bool:
        """Advance by a token the mask allowed. False if the grammar refused it; the
        matcher is then in error and its masks allow only EOS."""
        return self._matcher.consume_token(token_id)

    def allows(self, token_id: int) -> bool:
        """Whether `token_id` may come next (nothing moves)."""
        return self._matcher.validate_tokens([token_id]) == 1

    @property
    def accepting(self) -> bool:
        """The grammar may end here: EOS may come next."""
        return self._matcher.is_accepting()

    @property
    def failed(self) -> bool:
        """In error: nothing but EOS can follow."""
        return self._matcher.is_error()

    @property
    def error(self) -> str:
        return self._matcher.get_error()

    def copy(self) -> GrammarMatcher:
        return GrammarMatcher(self._matcher.deep_copy())


class GrammarCompiler:
    """The grammars of one tokenizer: each text compiled once, then copied per
    generation. Grammars may be per request (names from the request), so only the
    `kept` most recently used stay compiled; `compile_s` records what each of those
    took to compile, least recently used first."""

    def __init__(
        self, tokenizer: Tokenizer, vocab_size: int, eos_ids: Sequence[int], kept: int = 256
    ) -> None:
        if not eos_ids:
            raise ValueError("grammar masks need the model's EOS token id")
        started = time.perf_counter()
        self.vocab: TokenBytes = token_bytes(tokenizer, vocab_size)
        self._encoder = tokenizer
        wrapper = llguidance.TokenizerWrapper(_Vocabulary(tokenizer, self.vocab, eos_ids[0]))
        self._tokenizer = llguidance.LLTokenizer(
            wrapper, n_vocab=vocab_size, eos_token=list(eos_ids)
        )
        self.vocab_s = time.perf_counter() - started
        self.vocab_size = vocab_size
        self._kept = kept
        self._lock = threading.Lock()
        # grammar text -> (template, seconds it took to compile), least recently used first
        self._templates: OrderedDict[str, tuple[GrammarMatcher, float]] = OrderedDict()

    @staticmethod
    def from_checkpoint(
        model_path: Path, vocab_size: int, eos_ids: Sequence[int]
    ) -> GrammarCompiler:
        return GrammarCompiler.from_tokenizer_file(
            model_path / "tokenizer.json", vocab_size, eos_ids
        )

    @staticmethod
    def from_tokenizer_file(path: Path, vocab_size: int, eos_ids: Sequence[int]) -> GrammarCompiler:
        """The compiler of a `tokenizer.json` (a folder's, or a block zoo's copy)."""
        if not path.is_file():
            raise ValueError(f"grammar masks need the checkpoint's tokenizer.json ({path})")
        return GrammarCompiler(Tokenizer.from_file(str(path)), vocab_size, eos_ids)

    def encode(self, text: str) -> list[int]:
        """`text` as this tokenizer writes it (no special tokens)."""
        return list(self._encoder.encode(text, add_special_tokens=False).ids)

    @property
    def compile_s(self) -> dict[str, float]:
        """Seconds each kept grammar took to compile, least recently used first."""
        with self._lock:
            return {grammar: seconds for grammar, (_, seconds) in self._templates.items()}

    def matcher(self, grammar: str) -> GrammarMatcher:
        """A fresh matcher at the start of `grammar`; ValueError if it does not compile.
        Thread-safe (vLLM in process checks grammars at `add` and masks in `step`)."""
        with self._lock:
            kept = self._templates.get(grammar)
            if kept is not None:
                self._templates.move_to_end(grammar)
                return kept[0].copy()
            started = time.perf_counter()
            lark = llguidance.LLMatcher.grammar_from_lark(grammar)
            compiled = llguidance.LLMatcher(self._tokenizer, lark, log_level=0)
            if compiled.is_error():
                raise ValueError(f"invalid grammar: {compiled.get_error()}")
            template = GrammarMatcher(compiled)
            self._templates[grammar] = (template, time.perf_counter() - started)
            while len(self._templates) > self._kept:
                self._templates.popitem(last=False)
            return template.copy()

    def rebuilt(self, grammar: str, generated_ids: Sequence[int]) -> GrammarMatcher:
        """A matcher that has accepted `generated_ids` (the generation's kept ids)."""
        matcher = self.matcher(grammar)
        for token_id in generated_ids:
            if not matcher.accept(token_id):
                raise EngineError(f"the grammar refuses kept token {token_id}: {matcher.error}")
        return matcher


class _Vocabulary:
    """What `llguidance.TokenizerWrapper` reads from a tokenizer."""

    def __init__(self, tokenizer: Tokenizer, vocab: TokenBytes, eos_id: int) -> None:
        self._tokenizer = tokenizer
        self.tokens = vocab.tokens
        self.special_token_ids = sorted(vocab.special)
        self.eos_token_id = eos_id
        self.bos_token_id = None

    def __call__(self, text: bytes) -> list[int]:
        decoded = text.decode("utf-8", errors="replace")
        return list(self._tokenizer.encode(decoded, add_special_tokens=False).ids)
