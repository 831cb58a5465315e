"""An instruction being written: text pieces, some of them names the plan copies.

The generator writes a sentence from a pattern with slots (`"have you seen {x}?"`),
fills each slot with a noun phrase whose name part is what the plan quotes, then
writes it the way people type (casing, typos, punctuation; `noise.py`). Names are
kept as pieces of their own so the noise never garbles a name and the plan quotes it
exactly as it appears in the instruction, whatever the casing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SLOT = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Phrase:
    """A noun phrase: `before` + `name` + `after`; the plan quotes `name`."""

    before: str  # determiner, possessor: "my ", "the kid's "
    name: str  # attributes and head: "red cup"
    after: str = ""  # post-modifier: " with the broken strap"


@dataclass(frozen=True)
class Piece:
    text: str
    name_of: str | None = None  # the slot whose name this piece is


def fill(pattern: str, slots: dict[str, Phrase | str]) -> list[Piece]:
    """`pattern` with each `{slot}` replaced; a `Phrase` slot's name is its own piece."""
    pieces: list[Piece] = []
    position = 0
    for match in _SLOT.finditer(pattern):
        pieces.append(Piece(pattern[position : match.start()]))
        value = slots[match.group(1)]
        if isinstance(value, Phrase):
            pieces += [
                Piece(value.before),
                Piece(value.name, match.group(1)),
                Piece(value.after),
            ]
        else:
            pieces.append(Piece(value))
        position = match.end()
    pieces.append(Piece(pattern[position:]))
    return [p for p in pieces if p.text]


def join(pieces: list[Piece]) -> tuple[str, dict[str, str]]:
    """The sentence, and each slot's name as it appears in it."""
    names: dict[str, str] = {}
    for piece in pieces:
        if piece.name_of is not None:
            names.setdefault(piece.name_of, piece.text)
    text = re.sub(r"\s+", " ", "".join(p.text for p in pieces)).strip()
    return text, names
