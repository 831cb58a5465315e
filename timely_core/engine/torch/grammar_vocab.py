"""What each token id adds to the decoded text, as bytes: the vocabulary a grammar
matcher walks. It must be what the service's detokenizer produces, not the raw
vocabulary strings, or the grammar would judge text nobody sees.

Byte-level BPE only (GPT-2 style: `ByteLevel` decoder, optionally followed by
`Replace` steps). The planner's tokenizer is one: its digits carry place marks
(two control characters the normalizer inserts and a `Replace` decoder removes),
so "436" is three tokens whose bytes here are "4", "3", "6", and a token that is
a lone mark adds nothing. Tokens that add nothing, special tokens and ids past the
tokenizer's vocabulary are returned as `special`: a grammar never allows them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from tokenizers import Tokenizer


@dataclass(frozen=True)
class TokenBytes:
    tokens: list[bytes]  # by id; for a special token its name, for llguidance's records
    special: frozenset[int]


def token_bytes(tokenizer: Tokenizer, vocab_size: int) -> TokenBytes:
    """The bytes each id in [0, vocab_size) adds to `tokenizer.decode`'s text.
    Raises ValueError for a tokenizer that does not decode byte-level."""
    config = json.loads(tokenizer.to_str())
    replaces = _byte_level_replaces(config.get("decoder"))
    added = {int(t["id"]): bool(t["special"]) for t in config.get("added_tokens", [])}
    byte_of = _byte_decoder()
    tokens: list[bytes] = []
    special: set[int] = set()
    for token_id in range(vocab_size):
        piece = tokenizer.id_to_token(token_id)
        if piece is None or added.get(token_id, False):
            tokens.append((piece or f"<unused {token_id}>").encode())
            special.add(token_id)
            continue
        # as tokenizers' ByteLevel decoder: mapped if every character is a byte's
        mapped = all(c in byte_of for c in piece)
        raw = bytes(byte_of[c] for c in piece) if mapped else piece.encode()
        for pattern, content in replaces:
            raw = raw.replace(pattern, content)
        if not raw:
            special.add(token_id)
        tokens.append(raw)
    return TokenBytes(tokens, frozenset(special))


def _byte_level_replaces(decoder: Any) -> list[tuple[bytes, bytes]]:
    """The `Replace` steps after a `ByteLevel` decoder, as byte replacements."""
    steps = decoder.get("decoders", []) if decoder and decoder["type"] == "Sequence" else [decoder]
    if not steps or not steps[0] or steps[0].get("type") != "ByteLevel":
        kind = decoder.get("type") if decoder else None
        raise ValueError(
            f"grammar masks need a byte-level BPE tokenizer; this one decodes with {kind!r}"
        )
    replaces = []
    for step in steps[1:]:
        pattern = step.get("pattern", {}).get("String") if step.get("type") == "Replace" else None
        if pattern is None:
            raise ValueError(
                f"grammar masks cannot follow a {step.get('type')!r} decoder step after ByteLevel"
            )
        replaces.append((pattern.encode(), str(step["content"]).encode()))
    return replaces


@cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-to-character table, reversed: the character standing for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}
