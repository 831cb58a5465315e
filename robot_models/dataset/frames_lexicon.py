"""The words the frames generator draws from: the open lexicon plus the template
vocabulary, which the shipped planner and the LRTrace tasks already use (everyday
objects such as pens and cups that the decontaminated lexicon had to give up)."""

from __future__ import annotations

from functools import cache
from typing import Literal

from robot_models.dataset import vocabulary as v
from robot_models.dataset.lexicon import Lexicon, lexicon


def _merged(words: tuple[str, ...], extra: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(set(words) | set(extra)))


@cache
def _template_words() -> frozenset[str]:
    lists: tuple[tuple[str, ...], ...] = (
        v.HOUSEHOLD_OBJECTS,
        v.HANDOVER_OBJECTS,
        v.FURNITURE,
        v.SCENE_FILLERS,
        v.FRUITS,
        v.VEGETABLES,
        v.ANIMALS,
        v.PEOPLE,
        v.OBSTACLES,
        *v.DESK_CATEGORIES.values(),
    )
    return frozenset(w for words in lists for w in words)


@cache
def frames_lexicon(split: Literal["train", "heldout"]) -> Lexicon:
    """`lexicon(split)`, the template words added to "train" and kept out of "heldout"
    (a held-out object must be one no training example names)."""
    lex = lexicon(split)
    if split == "heldout":
        known = _template_words()

        def unseen(words: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(w for w in words if w not in known)

        return Lexicon(
            objects=unseen(lex.objects),
            furniture=unseen(lex.furniture),
            fruits=unseen(lex.fruits),
            vegetables=unseen(lex.vegetables),
            animals=unseen(lex.animals),
            people=unseen(lex.people),
            desk={place: unseen(words) for place, words in lex.desk.items()},
            colours=lex.colours,
            materials=lex.materials,
            sizes=lex.sizes,
            states=lex.states,
        )
    return Lexicon(
        objects=_merged(lex.objects, v.HOUSEHOLD_OBJECTS + v.HANDOVER_OBJECTS),
        furniture=_merged(lex.furniture, v.FURNITURE + v.OBSTACLES),
        fruits=_merged(lex.fruits, v.FRUITS),
        vegetables=_merged(lex.vegetables, v.VEGETABLES),
        animals=_merged(lex.animals, v.ANIMALS),
        people=_merged(lex.people, v.PEOPLE),
        desk={
            place: _merged(words, v.DESK_CATEGORIES.get(place, ()))
            for place, words in lex.desk.items()
        },
        colours=_merged(lex.colours, v.COLORS),
        materials=lex.materials,
        sizes=lex.sizes,
        states=lex.states,
    )
