"""Incremental detokenization of a growing list of generated token ids.

The generation keeps its token ids (never re-tokenized text: the round trip can
change ids, TimelyLLM §4.1); text is derived from them one token at a time. As in
vLLM, two offsets into the ids bound a short window: decoding
`ids[prefix_offset:read_offset]` and `ids[prefix_offset:]` and taking the
difference yields the new text, so tokenizer-specific joining (a leading-space
marker, byte-level pieces) is applied exactly as a full decode would. A window
that ends in the middle of a multi-byte character decodes to U+FFFD; its text is
held back until the bytes that complete it arrive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

# Prompt ids kept as left context so the first generated token decodes as it
# would inside the whole sequence (vLLM uses the same 5).
CONTEXT_TOKENS = 5
_REPLACEMENT = "\ufffd"


class TokenDecoder(Protocol):
    """The part of `tokenizers.Tokenizer` we use."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str: ...


class IncrementalDetokenizer:
    """Turns generated ids into text deltas; concatenated deltas equal the decode of
    all generated ids (given the same left context)."""

    def __init__(self, tokenizer: TokenDecoder, context_ids: Sequence[int] = ()) -> None:
        self._tokenizer = tokenizer
        self._ids: list[int] = list(context_ids[-CONTEXT_TOKENS:]) if context_ids else []
        self._prefix_offset = 0
        self._read_offset = len(self._ids)
        self._context_len = len(self._ids)

    @property
    def generated_ids(self) -> list[int]:
        return self._ids[self._context_len :]

    def push(self, token_id: int) -> str:
        """Append one id; return the text it completes ('' while a character is split)."""
        self._ids.append(token_id)
        return self._advance(final=False)

    def flush(self) -> str:
        """End of generation: return any held-back text, even an incomplete character."""
        return self._advance(final=True)

    def _advance(self, final: bool) -> str:
        if self._read_offset >= len(self._ids):
            return ""
        prefix_text = self._tokenizer.decode(
            self._ids[self._prefix_offset : self._read_offset], skip_special_tokens=True
        )
        new_text = self._tokenizer.decode(
            self._ids[self._prefix_offset :], skip_special_tokens=True
        )
        if not final and (len(new_text) <= len(prefix_text) or new_text.endswith(_REPLACEMENT)):
            return ""
        delta = new_text[len(prefix_text) :]
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)
        return delta
