"""How people type: casing, keyboard typos and loose punctuation.

Typos touch only the words around names, never a name (a plan quotes a name as the
operator wrote it, so a typo there would teach the planner to misspell it). Casing
applies to the whole sentence, names included: the plan copies the name as cased.
"""

from __future__ import annotations

import random
import re

from robot_models.dataset.utterance import Piece

TYPO_RATE = 0.03  # per word outside names
_WORD = re.compile(r"[A-Za-z]{4,}")


def typo(word: str, rng: random.Random) -> str:
    """One keyboard slip: two neighbours swapped, a letter dropped or doubled."""
    i = rng.randrange(1, len(word) - 1)
    kind = rng.random()
    if kind < 0.4:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind < 0.7:
        return word[:i] + word[i + 1 :]
    return word[: i + 1] + word[i] + word[i + 1 :]


def _typos(text: str, rng: random.Random) -> str:
    return _WORD.sub(
        lambda m: typo(m.group(0), rng) if rng.random() < TYPO_RATE else m.group(0), text
    )


def _punctuation(pieces: list[Piece], rng: random.Random) -> list[Piece]:
    """Drop the final punctuation or add some, as people do."""
    if not pieces or pieces[-1].name_of is not None:
        return pieces if rng.random() < 0.8 else [*pieces, Piece(rng.choice((".", "!", "?")))]
    last = pieces[-1].text.rstrip()
    roll = rng.random()
    if roll < 0.35:
        last = last.rstrip(".!?")
    elif roll < 0.45 and last[-1:] not in ".!?":
        last += rng.choice(("!", ".", "!!", "..."))
    return [*pieces[:-1], Piece(last)] if last else pieces[:-1]


def type_out(pieces: list[Piece], rng: random.Random) -> list[Piece]:
    """`pieces` as typed: typos outside names, punctuation, then one casing style."""
    pieces = [p if p.name_of is not None else Piece(_typos(p.text, rng)) for p in pieces]
    pieces = _punctuation(pieces, rng)
    roll = rng.random()
    if roll < 0.5:  # all lower case, the most common way to type to a machine
        return [Piece(p.text.lower(), p.name_of) for p in pieces]
    if roll < 0.52:
        return [Piece(p.text.upper(), p.name_of) for p in pieces]
    if roll < 0.9 and pieces:  # sentence case
        first = pieces[0]
        return [Piece(first.text[:1].upper() + first.text[1:], first.name_of), *pieces[1:]]
    return pieces  # as written
