"""The open object vocabulary the data generator draws from: the committed word lists
of `data/lexicon/` (made by `lexicon_extract.py` from WordNet and wordfreq; training
needs neither), split 90/10 by a stable hash so held-out objects never reach training.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from robot_models.skills import DATA_DIR

LEXICON_DIR = DATA_DIR / "lexicon"
HELDOUT_PERCENT = 10
Split = Literal["train", "heldout"]

# the arm's desk places and the list each one collects
DESK_FILES = {
    "tray": "tableware.txt",
    "holder": "writing.txt",
    "bin": "waste.txt",
    "shelf": "reading.txt",
}

SIZES = ("small", "tiny", "little", "big", "large", "huge", "medium", "mini", "long", "short")
STATES = (
    "broken",
    "chipped",
    "cracked",
    "half-empty",
    "empty",
    "full",
    "old",
    "new",
    "dirty",
    "clean",
    "wet",
    "dusty",
    "spare",
    "used",
    "open",
    "closed",
    "folded",
)


@dataclass(frozen=True)
class Lexicon:
    objects: tuple[str, ...]
    furniture: tuple[str, ...]
    fruits: tuple[str, ...]
    vegetables: tuple[str, ...]
    animals: tuple[str, ...]
    people: tuple[str, ...]
    desk: dict[str, tuple[str, ...]]  # "tray" | "holder" | "bin" | "shelf" -> its objects
    colours: tuple[str, ...]  # attributes are not split
    materials: tuple[str, ...]
    sizes: tuple[str, ...]
    states: tuple[str, ...]

    def nouns(self) -> frozenset[str]:
        """Every noun of this split, over all lists."""
        lists = (self.objects, self.furniture, self.fruits, self.vegetables, self.animals)
        desk = tuple(word for words in self.desk.values() for word in words)
        return frozenset(w for words in (*lists, self.people, desk) for w in words)


def split_of(entry: str) -> Split:
    """ "heldout" for a stable 10% of entries (the same in every list and every run)."""
    digest = hashlib.blake2b(entry.encode("utf-8"), digest_size=8).digest()
    return "heldout" if int.from_bytes(digest, "big") % 100 < HELDOUT_PERCENT else "train"


def read_list(name: str, directory: Path = LEXICON_DIR) -> tuple[str, ...]:
    """The entries of one list file: one per line, '#' lines are comments."""
    path = directory / name
    if not path.is_file():
        raise FileNotFoundError(
            f"lexicon list {path} is missing: run python -m robot_models.dataset.lexicon_extract"
        )
    lines = path.read_text(encoding="utf-8").splitlines()
    return tuple(line for line in lines if line and not line.startswith("#"))


@cache
def lexicon(split: Split) -> Lexicon:
    """The lexicon's `split`: "train" (90%) or "heldout" (10%) of every noun list."""
    if split not in ("train", "heldout"):
        raise ValueError(f"unknown lexicon split {split!r}; known: 'train', 'heldout'")

    def nouns(name: str) -> tuple[str, ...]:
        return tuple(word for word in read_list(name) if split_of(word) == split)

    return Lexicon(
        objects=nouns("objects.txt"),
        furniture=nouns("furniture.txt"),
        fruits=nouns("fruits.txt"),
        vegetables=nouns("vegetables.txt"),
        animals=nouns("animals.txt"),
        people=nouns("people.txt"),
        desk={place: nouns(name) for place, name in DESK_FILES.items()},
        colours=read_list("colours.txt"),
        materials=read_list("materials.txt"),
        sizes=SIZES,
        states=STATES,
    )


_ONSETS = ("b", "bl", "br", "d", "dr", "f", "fl", "fr", "g", "gl", "gr", "k", "kl", "kr", "l",
           "m", "n", "p", "pl", "pr", "qu", "s", "sk", "sl", "sn", "sp", "st", "t", "tr", "v",
           "w", "z")  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "oo", "ee", "ai", "oi")
_CODAS = ("", "", "l", "m", "n", "r", "s", "z")
_MIDDLES = ("b", "d", "g", "k", "l", "m", "n", "p", "t", "v", "z", "zz", "gg", "bb")
_ENDINGS = ("in", "le", "et", "o", "a", "er", "y", "ix", "op", "um", "ip", "an", "el")


_TRIPLE = re.compile(r"(.)\1\1")  # "noillle" is not pronounceable


def _pair(rng: random.Random) -> str:
    """Two syllables: "flor" + "bin", "qua" + "zzle"."""
    first = rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
    second = rng.choice(_MIDDLES) + rng.choice(_ENDINGS)
    return first + second


def nonce_name(rng: random.Random) -> str:
    """A pronounceable made-up noun of one or two syllable pairs ("florbin"), never a
    word of the lexicon; deterministic for a seeded `rng`."""
    known = lexicon("train").nouns() | lexicon("heldout").nouns()
    while True:
        name = "".join(_pair(rng) for _ in range(rng.choice((1, 1, 2))))
        if name not in known and not _TRIPLE.search(name):
            return name
