"""The names a plan may give its objects: what the operator said and what the scene
lists (issue #22: grounded plans).

A small planner asked for "the blinking amber light" tends to write an object it was
trained on instead ("table"); a robot should not approach something nobody asked
for or that is not there. `grounded_names` lists the phrases of a request that can
name an object (`request_phrases`: noun phrases less their determiners, and their
endings) and the scene's items, as written and in lower case. With them
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

# Closed-class English words (and texting forms): a phrase of the request holds
# none (a scene's items are taken whole). Content words are never listed, so an
# unseen object's name is always allowed.
FUNCTION_WORDS = frozenset(
    word
    for line in (Path(__file__).parent / "data" / "function_words.txt").read_text().splitlines()
    if not line.startswith("#")
    for word in line.split()
)


def request_phrases(text: str) -> list[str]:
    """The phrases of `text` that can name an object, in order of appearance: each
    maximal run of words inside one clause without a function word (a noun phrase
    less its determiner: "the yellow rubber duck" gives "yellow rubber duck"), and
    its endings ("rubber duck", "duck"), since English noun phrases end in their
    head. A run's beginning alone ("yellow") is not a name."""
    phrases: dict[str, None] = {}
    for clause in _CLAUSE_END.split(text):
        run: list[str] = []
        for word in [*_WORD.findall(clause), ""]:
            if word and word.lower() not in FUNCTION_WORDS:
                run.append(word)
                continue
            for start in range(max(0, len(run) - MAX_NAME_WORDS), len(run)):
                phrase = " ".join(run[start:])
                if len(phrase) <= _MAX_NAME_CHARS:
                    phrases[phrase] = None
            run = []
    return list(phrases)


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
    """The object names a plan for this request may use: the instruction's phrases,
    the scene's items and their phrases, each as written and in lower case, sorted
    so the same request always gives the same grammar."""
    names: set[str] = set()
    items = scene_items(scene)
    for name in [*request_phrases(instruction), *items, *request_phrases(", ".join(items))]:
        names.update((name, name.lower()))
    return tuple(sorted(names))
