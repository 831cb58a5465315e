"""Decontamination: generated instructions that say what an evaluation entry says.

The hand-written evaluation sets measure how the planner does on phrasings it never
saw, so a generated instruction with the shape of an evaluation instruction (the
same words once numbers and object names are blanked) is dropped from the data. The
sets are read only to remove examples, never to write one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from robot_models.natural_eval import alternatives, natural_eval
from robot_models.ordinary_instructions import ordinary_instructions
from robot_models.skills import ROBOT_TYPES

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_WORD = re.compile(r"[a-z0-9']+|[^\sa-z0-9']")
_LONGEST_NAME = 6  # words


def _blanks(names: Iterable[str]) -> frozenset[tuple[str, ...]]:
    return frozenset(tuple(_WORD.findall(n.lower())) for n in names)


@cache
def _vocabulary_blanks(vocabulary: frozenset[str]) -> frozenset[tuple[str, ...]]:
    return _blanks(vocabulary)


def shape(
    text: str, names: Iterable[str], vocabulary: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """`text`'s words, lower case, with numbers and any of `names` or `vocabulary`
    (whole words, longest first) each replaced by one blank."""
    named, known = _blanks(names), _vocabulary_blanks(vocabulary)
    words = _WORD.findall(_NUMBER.sub("<n>", text.lower()))
    out: list[str] = []
    i = 0
    while i < len(words):
        for length in range(min(_LONGEST_NAME, len(words) - i), 0, -1):
            span = tuple(words[i : i + length])
            if span in named or span in known:
                out.append("<w>")
                i += length
                break
        else:
            out.append(words[i])
            i += 1
    return tuple(out)


@cache
def _evaluation(robot_type: str) -> tuple[frozenset[str], tuple[tuple[str, frozenset[str]], ...]]:
    """The evaluation instructions of `robot_type`, lower case, each with its names."""
    said = {e.instruction.strip().lower() for e in natural_eval(robot_type)}
    said |= {o.instruction.strip().lower() for o in ordinary_instructions(robot_type)}
    entries = tuple(
        (e.instruction, frozenset(n for c in e.objects for n in alternatives(c)))
        for e in natural_eval(robot_type)
    )
    entries += tuple((o.instruction, frozenset()) for o in ordinary_instructions(robot_type))
    return frozenset(said), entries


@cache
def _evaluation_shapes(robot_type: str, vocabulary: frozenset[str]) -> frozenset[tuple[str, ...]]:
    _, entries = _evaluation(robot_type)
    return frozenset(shape(text, names, vocabulary) for text, names in entries)


def contaminated(
    robot_type: str, instruction: str, names: Iterable[str], vocabulary: frozenset[str]
) -> bool:
    """Whether `instruction` (with the object `names` its plan quotes) is an evaluation
    instruction, or has one's shape once `vocabulary`'s words are blanked too."""
    if robot_type not in ROBOT_TYPES:
        raise ValueError(f"unknown robot type {robot_type!r}")
    said, _ = _evaluation(robot_type)
    if instruction.strip().lower() in said:
        return True
    return shape(instruction, names, vocabulary) in _evaluation_shapes(robot_type, vocabulary)
