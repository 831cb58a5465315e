"""The names a plan may give its objects: what the operator said and what the scene
lists (issue #22: grounded plans).

A small planner asked for "the blinking amber light" tends to write an object it was
trained on instead ("table"); a robot should not approach something nobody asked
for or that is not there. `grounded_names` lists the phrases of a request that can
name an object (`request_phrases`: whole noun phrases less their determiners, by
English word classes) and the scene's items, as written and in lower case. With them
`grammar.plan_grammar(..., names=...)` allows exactly these, plus an argument's
`known_names` (the arm's places and bins), as object arguments: masked decoding
then copies a name from the request instead of recalling one.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_NAME_WORDS = 6
# a word: letters or digits, with inner hyphens, dots or slashes ("half-finished",
# "0.5", "usb-c"); an apostrophe ends it ("baby's" is "baby" then "s")
_WORD = re.compile(r"[^\W_]+(?:[-./][^\W_]+)*")
# where a phrase cannot continue: clause punctuation, quotes, arrows, brackets
_CLAUSE_END = re.compile(r"[,;:!?()\[\]{}\"'`<>=|&+*#\n\r\t→←]|\.(?!\w)|\s-+\s|\s/\s")
_MAX_NAME_CHARS = 64
_DATA = Path(__file__).parent / "data"


def read_sections(path: Path) -> dict[str, frozenset[str]]:
    """A word list: `[section]` lines, each followed by words; `#` comments."""
    sections: dict[str, set[str]] = {}
    current: set[str] = set()
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[] "), set())
        else:
            current.update(line.split())
    return {section: frozenset(words) for section, words in sections.items()}


# Closed-class English words (and texting forms): a phrase of the request holds none
# (a scene's items are taken whole). Content words are never listed, so an unseen
# object's name is always allowed.
_FUNCTION = read_sections(_DATA / "function_words.txt")
FUNCTION_WORDS = frozenset().union(*_FUNCTION.values())
# A run followed directly by one of these is a verb or a modal with its object or
# subject ("load the gear", "can u", "hand me"), not a name.
OBJECT_OPENERS = _FUNCTION["determiner"] | _FUNCTION["person"]
# Words that may come before a clause's imperative verb ("then grab", "pls find").
CLAUSE_OPENERS = _FUNCTION["conjunction"] | _FUNCTION["filler"]
# WordNet's verb, adjective and adverb forms that are never nouns
# (`dataset/word_classes_extract.py`): a modifier may start a name but not end it
# ("broken flashlight", never "stapler walked"); any other is never in one ("bring",
# "slowly"). A word not listed may be a noun: unseen names stay allowed.
_CLASSES = read_sections(_DATA / "word_classes.txt")
MODIFIERS, NEVER_IN_NAMES = _CLASSES["modifier"], _CLASSES["other"]


def request_phrases(text: str) -> list[str]:
    """The phrases of `text` that can name an object, in order of appearance: each
    maximal run of words inside one clause without a function word or a word that
    can only be a verb or an adverb (a noun phrase less its determiner: "the yellow
    rubber duck" gives "yellow rubber duck", not "duck": a name is quoted as said),
    less trailing words that cannot be nouns ("my stapler walked off" gives
    "stapler"). A run that opens its clause (after connectives and fillers at most)
    may start with an imperative verb, so it also gives itself less its first word
    ("then grab red cup": "red cup"). A run followed by a determiner or a personal
    pronoun is a verb or a modal, not a name ("load the gear": "load"; "can u": "can")."""
    phrases: dict[str, None] = {}
    for clause in _CLAUSE_END.split(text):
        run: list[str] = []
        opens_clause = True  # only connectives and fillers so far ("then", "pls")
        for word in [*_WORD.findall(clause), ""]:
            lower = word.lower()
            if word and lower not in FUNCTION_WORDS and lower not in NEVER_IN_NAMES:
                run.append(word)
                continue
            if lower not in OBJECT_OPENERS:
                for phrase in _names_of(run, opens_clause):
                    phrases[phrase] = None
            opens_clause = not run and opens_clause and lower in CLAUSE_OPENERS
            run = []
    return list(phrases)


def _names_of(run: list[str], opens_clause: bool) -> list[str]:
    """A run's names: the run less trailing words that cannot end a name (its last
    `MAX_NAME_WORDS` words), and the same less its first word if it opens its
    clause; none over `_MAX_NAME_CHARS` characters."""
    end = len(run)
    while end and run[end - 1].lower() in MODIFIERS:
        end -= 1
    starts = [max(0, end - MAX_NAME_WORDS)]
    if opens_clause and end - starts[0] > 1 and starts[0] == 0:
        starts.append(1)
    names = (" ".join(run[start:end]) for start in starts if start < end)
    return [name for name in names if len(name) <= _MAX_NAME_CHARS]


def scene_items(scene: str) -> list[str]:
    """The items a scene lists: "visible: sofa, coffee table; places: tray" gives
    sofa, coffee table and tray (each part's label before its colon is not an item)."""
    items: dict[str, None] = {}
    for part in scene.split(";"):
        listed = part.split(":", 1)[-1]
        for item in listed.split(","):
            name = " ".join(_WORD.findall(item))
            if name and len(name) <= _MAX_NAME_CHARS:
                items[name] = None
    return list(items)


def grounded_names(scene: str, instruction: str) -> tuple[str, ...]:
    """The object names a plan for this request may use: the instruction's phrases
    and the scene's items (whole, as listed), each as written and in lower case,
    sorted so the same request always gives the same grammar."""
    names: set[str] = set()
    for name in [*request_phrases(instruction), *scene_items(scene)]:
        names.update((name, name.lower()))
    return tuple(sorted(names))
