"""The surface grammar: how a task is put into words.

A frame (what to do) is realised by choosing a speech act: an imperative verb phrase
wrapped as a command, a polite request, a wish or a need; or one of the frame's own
questions and narratives ("where did I leave {x}?", "{x} walked off again"). Openers
("hey", "ok so"), closers ("thanks", "when you get a sec") and noun phrases with
determiners, possessors and attributes multiply the shapes, so the planner learns
which words carry the task rather than the sentences themselves.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from robot_models.dataset.lexicon import Lexicon, nonce_name
from robot_models.dataset.noise import type_out
from robot_models.dataset.utterance import Phrase, Piece, fill, join
from robot_models.skills import MAX_STRING_ARG_CHARS

# {vp} is an imperative verb phrase ("find {x}")
_WRAPS = (
    ("{vp}", 12),
    ("please {vp}", 3),
    ("{vp} please", 3),
    ("{vp}, please", 1),
    ("pls {vp}", 1),
    ("plz {vp}", 1),
    ("could you {vp}?", 3),
    ("could you please {vp}?", 1),
    ("can you {vp}?", 3),
    ("can u {vp}", 1),
    ("would you {vp}?", 1),
    ("will you {vp}?", 1),
    ("would you be able to {vp}?", 1),
    ("I need you to {vp}", 2),
    ("I'd like you to {vp}", 1),
    ("I want you to {vp}", 1),
    ("it would help if you could {vp}", 1),
    ("it'd be great if you could {vp}", 1),
    ("it would be nice if you could {vp}", 1),
    ("do me a favour and {vp}", 1),
    ("mind if you {vp}?", 1),
    ("try to {vp}", 1),
    ("you should {vp}", 1),
    ("go ahead and {vp}", 1),
    ("now {vp}", 1),
    ("next, {vp}", 1),
    ("your task: {vp}", 1),
    ("let's {vp}", 1),
    ("time to {vp}", 1),
    ("I'd appreciate it if you could {vp}", 1),
    ("is it possible to {vp}?", 1),
    ("when you can, {vp}", 1),
)
_OPENERS = (
    "hey",
    "hi",
    "hello",
    "ok",
    "ok so",
    "okay",
    "alright",
    "so",
    "um",
    "uh",
    "right",
    "yo",
    "excuse me",
    "listen",
    "quick one",
    "sorry",
    "hey there",
)
_CLOSERS = (
    "thanks",
    "thank you",
    "thx",
    "ty",
    "cheers",
    "lol",
    "when you get a sec",
    "when you have a moment",
    "if you can",
    "if possible",
    "asap",
    "quickly",
    "right now",
    "for me",
    "real quick",
    "no rush",
)
_ADDRESS = {"drone": ("drone", "buddy", "little drone", "copter"), "arm": ("robot", "arm", "bot")}

DETERMINERS = (
    ("the ", 10),
    ("my ", 5),
    ("a ", 3),
    ("our ", 1),
    ("that ", 1),
    ("this ", 1),
    ("his ", 1),
    ("her ", 1),
    ("your ", 1),
    ("some ", 1),
    ("", 1),
)
_POSSESSORS = (
    "mum",
    "mom",
    "dad",
    "the kid",
    "my son",
    "my daughter",
    "grandma",
    "the baby",
    "Sam",
    "Alex",
    "the boss",
    "my roommate",
)


def weighted(rng: random.Random, options: Sequence[tuple[str, int]]) -> str:
    return rng.choices([o for o, _ in options], [w for _, w in options])[0]


def thing_name(
    rng: random.Random, heads: Sequence[str], lexicon: Lexicon, nonce: float = 0.1
) -> str:
    """An object's name as people say it: 0-2 attributes and a head noun, sometimes a
    made-up noun so that the planner has to copy rather than recall."""
    head = nonce_name(rng) if rng.random() < nonce else rng.choice(heads)
    roll = rng.random()
    count = 0 if roll < 0.55 else 1 if roll < 0.9 else 2
    kinds = rng.sample(("colours", "materials", "sizes", "states"), count)
    order = ("sizes", "states", "colours", "materials")  # "small broken red plastic cup"
    words = [rng.choice(getattr(lexicon, kind)) for kind in sorted(kinds, key=order.index)]
    return " ".join([*words, head])


def phrase(
    rng: random.Random, name: str, determiners: Sequence[tuple[str, int]] = DETERMINERS
) -> Phrase:
    """`name` with a determiner or a possessor in front."""
    if rng.random() < 0.06:
        return Phrase(f"{rng.choice(_POSSESSORS)}'s ", name)
    return Phrase(weighted(rng, determiners), name)


def command(rng: random.Random, vp: str) -> str:
    """An imperative verb phrase put as one of the ways of asking."""
    return weighted(rng, _WRAPS).replace("{vp}", vp)


def frame_text(rng: random.Random, robot_type: str, core: str) -> str:
    """`core` with an opener, a form of address or a closer now and then."""
    roll = rng.random()
    if roll < 0.12:
        core = (
            f"{rng.choice(_OPENERS)}, {core}"
            if rng.random() < 0.7
            else f"{rng.choice(_OPENERS)} {core}"
        )
    elif roll < 0.18:
        core = f"{rng.choice(_ADDRESS[robot_type])}, {core}"
    if rng.random() < 0.12:
        sep = rng.choice((", ", " ", ". ", " - "))
        core = f"{core.rstrip('?.!')}{sep}{rng.choice(_CLOSERS)}"
    return core


def write(
    rng: random.Random, robot_type: str, pattern: str, slots: dict[str, Phrase | str]
) -> tuple[str, dict[str, str]]:
    """The instruction as typed, and each named slot's name as it appears in it."""
    pieces: list[Piece] = fill(frame_text(rng, robot_type, pattern), slots)
    return join(type_out(pieces, rng))


def refusal_request(
    rng: random.Random, robot_type: str, lexicon: Lexicon, activities: Sequence[str]
) -> tuple[str, str]:
    """A request for one of `activities` (verb phrases, `{x}` an object) the robot
    cannot do, and the plan that says so: `lg('cannot <activity>');` and nothing else."""
    while True:
        x = phrase(
            rng,
            thing_name(rng, lexicon.objects, lexicon, nonce=0.0),
            (("the ", 3), ("my ", 2), ("this ", 1)),
        )
        vp = rng.choice(activities)
        instruction, names = write(rng, robot_type, command(rng, vp), {"x": x})
        message = "cannot " + vp.replace("{x}", names.get("x", ""))
        if len(message) <= MAX_STRING_ARG_CHARS:
            return instruction, f"lg('{message}');"
