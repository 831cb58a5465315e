"""Extract the words that cannot be nouns (`data/word_classes.txt`) from WordNet and
wordfreq, for `robot_models.grounding`.

    python -m robot_models.dataset.word_classes_extract [--out FILE] [--min-zipf 2.5]

A developer tool: it needs the Debian package `wordnet-base` and the optional
dependency group `lexicon` (wordfreq); the service reads only the committed list.

A surface form is listed when WordNet knows it as a verb, adjective or adverb form
(lemmas, their regular inflections and the `*.exc` irregular ones) but not as a noun
(itself or by WordNet's noun morphology, so "keys" is a noun through "key"), and
people type it (wordfreq Zipf frequency at least `--min-zipf`; a form missing from the
list counts as a possible noun, so rare words stay allowed as names). Each is
classed:

- `modifier`: can stand before a noun inside a name (adjectives, participles and
  gerunds: "broken flashlight", "watering can"), but cannot end one;
- `other`: a verb's base, third-person or past-only form, or an adverb: never part of
  a name ("bring", "walked", "slowly").
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from robot_models.dataset.wordnet_nouns import WORDNET_DIR
from robot_models.skills import DATA_DIR

OUT_FILE = DATA_DIR / "word_classes.txt"
_SINGLE = re.compile(r"[a-z]+(?:-[a-z]+)*")
# wndb(5)'s morphology rules for nouns (morphy(7)): suffix -> replacement
_NOUN_RULES = (
    ("s", ""),
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("ies", "y"),
)
_VOWELS = set("aeiou")


def read_lemmas(directory: Path, pos: str) -> set[str]:
    """The single-word lemmas of `index.<pos>` (multi-word ones have underscores)."""
    path = directory / f"index.{pos}"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: install the Debian package wordnet-base "
            "(apt-get install -y wordnet-base)"
        )
    with open(path, encoding="utf-8") as f:
        return {
            line.split(" ", 1)[0]
            for line in f
            if not line.startswith(" ") and _SINGLE.fullmatch(line.split(" ", 1)[0])
        }


def read_exceptions(directory: Path, pos: str) -> dict[str, set[str]]:
    """`<pos>.exc`: irregular form -> its lemmas."""
    forms: dict[str, set[str]] = {}
    with open(directory / f"{pos}.exc", encoding="utf-8") as f:
        for line in f:
            form, *lemmas = line.split()
            forms.setdefault(form, set()).update(lemmas)
    return forms


def is_noun(form: str, nouns: set[str], noun_exceptions: dict[str, set[str]]) -> bool:
    """Whether WordNet's noun morphology finds `form` as a noun."""
    if form in nouns or noun_exceptions.get(form, set()) & nouns:
        return True
    return any(
        form.endswith(suffix) and form[: len(form) - len(suffix)] + repl in nouns
        for suffix, repl in _NOUN_RULES
    )


def verb_forms(verb: str) -> tuple[set[str], set[str]]:
    """Regular (base and third-person forms, participle and gerund forms) of `verb`;
    spellings that do not exist are generated too and fall to the frequency filter."""
    doubled = (
        verb + verb[-1] if len(verb) > 2 and verb[-1] not in _VOWELS | {"w", "x", "y"} else verb
    )
    if verb.endswith(("s", "x", "z", "ch", "sh")):
        third = verb + "es"
    elif verb.endswith("y") and len(verb) > 1 and verb[-2] not in _VOWELS:
        third = verb[:-1] + "ies"
    else:
        third = verb + "s"
    if verb.endswith("e"):
        past = {verb + "d"}
        ing = {verb[:-1] + "ing"} if not verb.endswith("ee") else {verb + "ing"}
    elif verb.endswith("y") and len(verb) > 1 and verb[-2] not in _VOWELS:
        past, ing = {verb[:-1] + "ied"}, {verb + "ing"}
    else:
        past, ing = {verb + "ed", doubled + "ed"}, {verb + "ing", doubled + "ing"}
    return {verb, third}, past | ing


def adjective_forms(adjective: str) -> set[str]:
    stem = adjective[:-1] if adjective.endswith("e") else adjective
    if adjective.endswith("y") and len(adjective) > 1 and adjective[-2] not in _VOWELS:
        stem = adjective[:-1] + "i"
    return {adjective, stem + "er", stem + "est"}


def classify(directory: Path) -> Iterator[tuple[str, str]]:
    """(form, class) for every non-noun form, before the frequency filter; a form that
    is a modifier in any reading is a modifier."""
    nouns = read_lemmas(directory, "noun")
    noun_exc = read_exceptions(directory, "noun")
    modifiers: set[str] = set()
    others: set[str] = set()
    for verb in read_lemmas(directory, "verb"):
        finite, participles = verb_forms(verb)
        others |= finite
        modifiers |= participles
    for form, lemmas in read_exceptions(directory, "verb").items():
        if _SINGLE.fullmatch(form) and lemmas:
            # irregular past forms: "fell", "brought" (past only) or "broken", "seen"
            (modifiers if form.endswith(("en", "wn", "ne")) else others).add(form)
    for adjective in read_lemmas(directory, "adj"):
        modifiers |= adjective_forms(adjective)
    for form in read_exceptions(directory, "adj"):
        if _SINGLE.fullmatch(form):
            modifiers.add(form)
    others |= read_lemmas(directory, "adv")
    for form in sorted(modifiers | others):
        if not is_noun(form, nouns, noun_exc):
            yield form, "modifier" if form in modifiers else "other"


def extract(
    directory: Path, zipf: Callable[[str], float], min_zipf: float
) -> list[tuple[str, str]]:
    return [(form, kind) for form, kind in classify(directory) if zipf(form) >= min_zipf]


def write(path: Path, entries: Iterable[tuple[str, str]], header: str) -> None:
    groups: dict[str, list[str]] = {"modifier": [], "other": []}
    for form, kind in entries:
        groups[kind].append(form)
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for kind, forms in groups.items():
        lines.append(f"[{kind}]")
        lines.extend(" ".join(forms[i : i + 12]) for i in range(0, len(forms), 12))
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_FILE)
    parser.add_argument("--wordnet", type=Path, default=WORDNET_DIR)
    parser.add_argument("--min-zipf", type=float, default=2.5)
    args = parser.parse_args(argv)
    import wordfreq

    def zipf(word: str) -> float:
        return float(wordfreq.zipf_frequency(word, "en"))

    entries = extract(args.wordnet, zipf, args.min_zipf)
    header = (
        "Words that cannot be nouns (robot_models/grounding.py), extracted by\n"
        f"python -m robot_models.dataset.word_classes_extract --min-zipf {args.min_zipf}\n"
        "from WordNet 3.0 (Debian wordnet-base) and wordfreq: [modifier] may stand\n"
        "before a noun in a name but not end it; [other] is never part of a name."
    )
    write(args.out, entries, header)
    print(f"{len(entries)} forms -> {args.out}")


if __name__ == "__main__":
    main()
