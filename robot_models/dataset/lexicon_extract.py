"""Extract the open object vocabulary (`data/lexicon/*.txt`) from WordNet and wordfreq.

    python -m robot_models.dataset.lexicon_extract [--out DIR]

A developer tool: it needs the Debian package `wordnet-base` and the optional
dependency group `lexicon` (wordfreq); training reads only the committed lists
(`lexicon.py`). Categories (`lexicon_categories.py`) come from WordNet's
lexicographer files and hypernym chains, over the senses people mostly mean
(`WordNetNouns.common_senses`); a word is kept when people type it (wordfreq's Zipf
frequency of the whole phrase, one point more for each further word) and it is lower
case, 1 to 40 characters of letters, spaces and hyphens, no stop-list word and no
insult.

Decontamination: every list loses the words of the two hand-written evaluation sets
(`natural_eval.yaml`'s annotated objects; any entry that occurs, or whose plural
occurs, as a whole word or phrase in an instruction of `natural_eval.yaml` or
`ordinary_instructions.yaml`), so those sets keep measuring unseen objects. It only
removes words; nothing else of the sets is read.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable
from importlib.metadata import version
from pathlib import Path

from robot_models.dataset.lexicon_categories import (
    CATEGORIES,
    MATERIAL_ADJECTIVES,
    Category,
)
from robot_models.dataset.wordnet_nouns import WORDNET_DIR, Synset, WordNetNouns
from robot_models.natural_eval import alternatives, natural_eval
from robot_models.ordinary_instructions import ordinary_instructions
from robot_models.skills import DATA_DIR, ROBOT_TYPES

LEXICON_DIR = DATA_DIR / "lexicon"
MAX_CHARS = 40
MAX_WORDS = 3
PER_EXTRA_WORD = 1.0
_WORD = re.compile(r"[a-z]+(?:[ -][a-z]+)*")

# Words far more common in instructions (or as generic talk) than as the object they
# also name: a planner reading "turn left at the back" must not see three objects.
_STOP_TEXT = """
    look find check turn move go stop help top left right back front side bit way light
    end set line point place thing stuff piece part item object article unit spot area
    home room space mark sign case track record round ring lead pass hold hit press fly
    stick pick lift land drop shot snap picture photo image view scan spin step run walk
    hand head face eye foot leg body base bottom edge corner centre center middle up down
    near far close open bar block board frame grip handle rest stand stay support drive
    cover drone robot gripper target goal mission task plan order job work call signal
    power charge level stage model type kind sort form shape size colour color pattern
    design style make brand system network net web link bond tie knot spring lot load
    weight mass pile stack heap row column bill cut slice post pole equipment device
    machine tool instrument gear kit supply supplies
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

# Glosses that mark a sense as an insult: never training vocabulary.
_OFFENSIVE = re.compile(
    r"\b(slur|derogatory|offensive|disparaging|obscene|vulgar|contemptuous|slang|insult)"
)


_OFFENSIVE_USAGE = frozenset(
    {"obscenity", "vulgarism", "ethnic_slur", "disparagement", "slang", "profanity"}
)


def _offensive(wordnet: WordNetNouns, synset: Synset) -> bool:
    """A sense marked as an insult or obscenity (by usage domain or gloss)."""
    usage = {lemma for o in synset.usage for lemma in wordnet.synsets[o].lemmas}
    return bool(usage & _OFFENSIVE_USAGE) or bool(_OFFENSIVE.search(synset.gloss))


def phrase(lemma: str) -> str | None:
    """WordNet's "tape_measure" -> "tape measure"; None for what no list may hold."""
    word = lemma.replace("_", " ")
    if (
        word != word.lower()
        or not 1 <= len(word) <= MAX_CHARS
        or not _WORD.fullmatch(word)
        or len(word.split()) > MAX_WORDS
    ):
        return None
    return word


def min_zipf(category: Category, word: str) -> float:
    """wordfreq has no phrase counts: it estimates a phrase from its words, so
    "european house cricket" scores like "house". Each further word asks one more
    Zipf point, which keeps "tape measure" and drops rare compounds."""
    return category.min_zipf + PER_EXTRA_WORD * (len(re.split(r"[ -]", word)) - 1)


def _part_of(wordnet: WordNetNouns, synset: Synset, wholes: set[int], portable: set[int]) -> bool:
    """Whether the synset is only ever a part of kinds of `wholes` (WordNet's part
    holonyms, one level: a car's dashboard, but not a waterwheel's pail, which is a
    container in its own right)."""
    if not synset.part_of or portable & wordnet.ancestors(synset.offset):
        return False
    return all(wholes & wordnet.ancestors(whole) for whole in synset.part_of)


def _senses(wordnet: WordNetNouns, lemma: str, category: Category) -> list[Synset] | None:
    """The senses of `lemma` that may put it in `category`; None when the word is out
    whatever its sense (an adjective where none are wanted, an insult)."""
    every = wordnet.synsets_of(lemma)
    is_adjective = lemma in wordnet.adjectives
    if (category.no_adjectives and is_adjective) or (
        category.describes and "_" not in lemma and not is_adjective
    ):
        return None
    if category.plant_first and every and every[0].lexfile == "noun.plant":
        senses = every[:2]
    elif category.top:
        senses = every[: category.top]
    else:
        senses = [wordnet.synsets[o] for o in wordnet.common_senses(lemma)]
    common = [wordnet.synsets[o] for o in wordnet.common_senses(lemma)]
    if category.unambiguous and any(s.lexfile not in category.lexfiles for s in common):
        return None
    # a noun with any insulting sense is out; an attribute is judged by its senses of
    # the category's kind ("black" the colour stays)
    judged = [s for s in senses if s.lexfile in category.lexfiles] if category.attribute else every
    return None if any(_offensive(wordnet, s) for s in judged) else senses


def extract(wordnet: WordNetNouns, zipf: Callable[[str], float], category: Category) -> set[str]:
    """The words of `category`, before decontamination."""
    roots = {wordnet.synset(name) for name in category.roots}
    exclude = {wordnet.synset(name) for name in category.exclude}
    wholes = {wordnet.synset(name) for name in category.parts_of}
    portable = {wordnet.synset(name) for name in category.parts_kept}
    keep = {wordnet.synset(name) for name in category.keep}

    def fits(synset: Synset, lemma: str) -> bool:
        above = wordnet.ancestors(synset.offset)
        return (
            synset.lexfile in category.lexfiles
            and not synset.is_instance
            and lemma in synset.lemmas  # as written there: "Granny_Smith" is a name
            and bool(roots & above)
            and bool(
                keep & above
                or (not exclude & above and not _part_of(wordnet, synset, wholes, portable))
            )
        )

    words: set[str] = set()
    for lemma in wordnet.senses:
        word = phrase(lemma)
        senses = None if word is None else _senses(wordnet, lemma, category)
        if word and senses and any(fits(s, lemma) for s in senses):
            words.add(word)
    return {
        word
        for word in words
        if zipf(word) >= min_zipf(category, word)
        and (category.attribute or word not in STOP_WORDS)
        and not (word.endswith("s") and word[:-1] in words)  # "cows" beside "cow"
        and not (category.headed and _head(word) not in words)
    }


def _head(word: str) -> str:
    """A phrase's last word, the one it names a kind of: "guide dog" -> "dog"."""
    return re.split(r"[ -]", word)[-1]


def evaluation_text() -> tuple[set[str], list[str]]:
    """The annotated object strings of the natural set and the lower-cased instructions
    of both hand-written sets (decontamination reads nothing else of them)."""
    annotated: set[str] = set()
    instructions: list[str] = []
    for robot_type in ROBOT_TYPES:
        for entry in natural_eval(robot_type):
            instructions.append(entry.instruction.lower())
            for choice in entry.objects:
                annotated.update(a.lower() for a in alternatives(choice))
        instructions += [o.instruction.lower() for o in ordinary_instructions(robot_type)]
    return annotated, instructions


def plurals(word: str) -> tuple[str, ...]:
    """The word and the regular plurals of its last word."""
    forms = [word, word + "s", word + "es"]
    if word.endswith("y"):
        forms.append(word[:-1] + "ies")
    if word.endswith(("f", "fe")):
        forms.append(word.rsplit("f", 1)[0] + "ves")
    return tuple(forms)


def contaminated(words: Iterable[str], annotated: set[str], instructions: list[str]) -> set[str]:
    """The words an evaluation set names: annotated, or said in an instruction."""
    text = "\n".join(instructions)
    hit = set()
    for word in words:
        if word in annotated:
            hit.add(word)
            continue
        pattern = r"(?<![a-z])(?:" + "|".join(map(re.escape, plurals(word))) + r")(?![a-z])"
        if re.search(pattern, text):
            hit.add(word)
    return hit


def write_list(path: Path, words: Iterable[str], header: str) -> None:
    path.write_text(f"# {header}\n" + "".join(f"{w}\n" for w in sorted(words)), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=LEXICON_DIR)
    parser.add_argument("--wordnet", type=Path, default=WORDNET_DIR)
    args = parser.parse_args(argv)
    import wordfreq  # only this tool needs it: the optional dependency group `lexicon`

    def zipf(word: str) -> float:
        return float(wordfreq.zipf_frequency(word, "en"))

    wordnet = WordNetNouns.load(args.wordnet)
    annotated, instructions = evaluation_text()
    args.out.mkdir(parents=True, exist_ok=True)
    for category in CATEGORIES:
        words = extract(wordnet, zipf, category)
        if category.file == "materials.txt":
            words |= {MATERIAL_ADJECTIVES[w] for w in words & MATERIAL_ADJECTIVES.keys()}
        if category.attribute:  # "the red book": colour words are no unseen objects
            removed = words & annotated
        else:
            removed = contaminated(words, annotated, instructions)
        kept = words - removed
        header = (
            f"{category.file}: made by python -m robot_models.dataset.lexicon_extract from "
            f"WordNet 3.0 (Debian wordnet-base) and wordfreq {version('wordfreq')}, zipf >= "
            f"{category.min_zipf} (+{PER_EXTRA_WORD:g} a further word); {len(removed)} words "
            "of the evaluation sets removed "
            "(decontamination only removes words)"
        )
        write_list(args.out / category.file, kept, header)
        print(f"{category.file:16} {len(kept):5} words ({len(removed)} removed)")


if __name__ == "__main__":
    main()
