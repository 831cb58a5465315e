"""A reader of WordNet 3.0's noun database files (`data.noun`, `index.noun`) as the
Debian package `wordnet-base` installs them, for the lexicon extractor only.

Training never imports this: the extracted word lists are committed text files
(`data/lexicon/`). The file format is WordNet's `wndb(5)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

WORDNET_DIR = Path("/usr/share/wordnet")

# wndb(5)'s lexicographer file numbers of the noun files this tool reads
LEXFILES = {
    3: "noun.Tops",
    5: "noun.animal",
    6: "noun.artifact",
    7: "noun.attribute",
    10: "noun.communication",
    13: "noun.food",
    17: "noun.object",
    18: "noun.person",
    20: "noun.plant",
    27: "noun.substance",
}


@dataclass
class Synset:
    offset: int
    lexfile: str  # "noun.artifact", ... ("other" for files not in LEXFILES)
    lemmas: tuple[str, ...]  # as written in WordNet: "tape_measure", "Bible"
    hypernyms: tuple[int, ...]  # "@" pointers (class hypernyms, not instances)
    is_instance: bool  # has an "@i" pointer: a named individual, not a kind
    usage: tuple[int, ...]  # ";u" pointers: usage domains (slang, ethnic slur, ...)
    part_of: tuple[int, ...]  # "#p" pointers: the wholes this is a part of
    gloss: str


@dataclass
class WordNetNouns:
    synsets: dict[int, Synset]
    senses: dict[str, tuple[int, ...]]  # lemma -> synset offsets, most frequent first
    tagged: dict[str, int]  # lemma -> how many of its senses SemCor attests (they come first)
    adjectives: frozenset[str]  # the lemmas of index.adj
    _closure: dict[int, frozenset[int]] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path = WORDNET_DIR) -> WordNetNouns:
        data, index = directory / "data.noun", directory / "index.noun"
        if not data.is_file() or not index.is_file():
            raise FileNotFoundError(
                f"WordNet noun files not found in {directory}: install the Debian package "
                "wordnet-base (apt-get install -y wordnet-base)"
            )
        senses: dict[str, tuple[int, ...]] = {}
        tagged: dict[str, int] = {}
        for lemma, offsets, attested in _read_index(index):
            senses[lemma], tagged[lemma] = offsets, attested
        adjectives = frozenset(lemma for lemma, _, _ in _read_index(directory / "index.adj"))
        return cls(dict(_read_data(data)), senses, tagged, adjectives)

    def common_senses(self, lemma: str) -> tuple[int, ...]:
        """The senses people mostly mean: those SemCor attests, at least the first."""
        offsets = self.senses.get(lemma, ())
        return offsets[: max(1, self.tagged.get(lemma, 0))]

    def synsets_of(self, lemma: str) -> list[Synset]:
        return [self.synsets[o] for o in self.senses.get(lemma, ())]

    def synset(self, name: str) -> int:
        """NLTK-style name -> offset: "container.n.01" is the first sense of container."""
        lemma, pos, number = name.rsplit(".", 2)
        offsets = self.senses.get(lemma) if pos == "n" else None
        if not offsets or not 1 <= int(number) <= len(offsets):
            raise KeyError(f"no WordNet noun synset {name!r}")
        return offsets[int(number) - 1]

    def ancestors(self, offset: int) -> frozenset[int]:
        """The synset and every hypernym above it (all paths)."""
        cached = self._closure.get(offset)
        if cached is None:
            found = {offset}
            for parent in self.synsets[offset].hypernyms:
                found |= self.ancestors(parent)
            cached = self._closure[offset] = frozenset(found)
        return cached


def _read_data(path: Path) -> Iterator[tuple[int, Synset]]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith(" "):  # the licence header
                continue
            head, _, gloss = line.partition(" | ")
            fields = head.split()
            offset, lexfile = int(fields[0]), LEXFILES.get(int(fields[1]), "other")
            count = int(fields[3], 16)
            lemmas = tuple(fields[4 + 2 * i] for i in range(count))
            at = 4 + 2 * count
            pointers = int(fields[at])
            hypernyms, usage, part_of, instance = [], [], [], False
            for i in range(pointers):
                symbol, target, pos = fields[at + 1 + 4 * i : at + 4 + 4 * i]
                if symbol == "@" and pos == "n":
                    hypernyms.append(int(target))
                elif symbol == "@i":
                    instance = True
                elif symbol == ";u":
                    usage.append(int(target))
                elif symbol == "#p":
                    part_of.append(int(target))
            synset = Synset(
                offset=offset,
                lexfile=lexfile,
                lemmas=lemmas,
                hypernyms=tuple(hypernyms),
                is_instance=instance,
                usage=tuple(usage),
                part_of=tuple(part_of),
                gloss=gloss.strip(),
            )
            yield offset, synset


def _read_index(path: Path) -> Iterator[tuple[str, tuple[int, ...], int]]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith(" "):
                continue
            fields = line.split()
            senses = int(fields[2])
            offsets = tuple(int(o) for o in fields[len(fields) - senses :])
            yield fields[0], offsets, int(fields[len(fields) - senses - 1])
