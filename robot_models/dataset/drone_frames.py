"""Drone task frames: what to do (a plan family with its slots), realised in words by
the surface grammar. The plan is a function of the frame and the scene alone, with
the policy of the drone prompt's guidance, so any wording of a frame plans the same."""

from __future__ import annotations

import random
from collections.abc import Callable

from robot_models.dataset import amounts
from robot_models.dataset.drone_templates import search_plan
from robot_models.dataset.example import Example
from robot_models.dataset.lexicon import Lexicon
from robot_models.dataset.phrasing import command, phrase, refusal_request, thing_name, write
from robot_models.dataset.scenes import drone_scene
from robot_models.dataset.utterance import Phrase

# Moving away from a danger: the opposite side (the prompt's guidance).
AWAY = {"front": "mb", "left": "mr", "right": "ml", "behind": "mf", "above": "md", "below": "mu"}
_SIDE_WORDS = {
    "front": (
        "ahead",
        "in front of you",
        "straight ahead",
        "from the front",
        "head-on",
        "right in front of you",
    ),
    "left": ("from the left", "on your left", "to your left", "from your left", "on the left side"),
    "right": (
        "from the right",
        "on your right",
        "to your right",
        "from your right",
        "on the right side",
    ),
    "behind": ("behind you", "from behind", "at your back", "from the rear", "right behind you"),
    "above": ("above you", "overhead", "from above", "right over you", "over your head"),
    "below": ("below you", "underneath you", "from below", "under you", "right under you"),
}
_MOVE_WORDS = {
    "mf": ("forward", "forwards", "ahead", "straight"),
    "mb": ("back", "backward", "backwards"),
    "ml": ("left", "to the left"),
    "mr": ("right", "to the right"),
    "mu": ("up", "higher", "upward"),
    "md": ("down", "lower", "downward"),
}
_MOVE_VERBS = ("fly", "go", "move", "head", "drift", "shift")
_TURN_WORDS = {
    "tc": ("right", "clockwise", "to the right", "cw"),
    "tu": ("left", "counterclockwise", "counter-clockwise", "anticlockwise", "to the left", "ccw"),
}

Frame = Callable[[random.Random, Lexicon], Example]


def _example(scene: str, instruction: str, plan: str, family: str) -> Example:
    return Example("drone", scene, instruction, plan, family)


def _q(name: str) -> str:
    return f"'{name}'"


_FIND_VPS = (
    "find {x}",
    "look for {x}",
    "search for {x}",
    "locate {x}",
    "track down {x}",
    "hunt for {x}",
    "go find {x}",
    "go look for {x}",
    "look around for {x}",
    "search the room for {x}",
    "scan the room for {x}",
    "see if you can find {x}",
    "try and find {x}",
    "find me {x}",
    "spot {x}",
    "figure out where {x} is",
    "help me find {x}",
    "look everywhere for {x}",
    "check around for {x}",
    "get eyes on {x}",
    "go get a picture of {x}",
    "fly over to {x} and take a photo",
    "go to {x} and snap a pic",
)
_FIND_SAYINGS = (
    "where is {x}?",
    "where's {x}",
    "where did I put {x}?",
    "where did I leave {x}",
    "where did {x} go?",
    "where has {x} gone",
    "have you seen {x}?",
    "has anyone seen {x}?",
    "any idea where {x} is?",
    "do you know where {x} is",
    "I can't find {x}",
    "I cant find {x} anywhere",
    "I lost {x}",
    "I've lost {x} somewhere",
    "I misplaced {x}",
    "{x} is missing",
    "{x} is gone again",
    "{x} went missing",
    "{x} walked off again",
    "{x} has disappeared",
    "I need {x}",
    "I'm looking for {x}",
    "looking for {x}",
    "can't find {x}",
    "no idea where {x} went",
    "{x}, where is it?",
)
_FIND_TAILS = (
    "",
    "",
    "",
    " somewhere in here",
    " in this room",
    " again",
    " anywhere",
    ", I think I left it around here",
    ", it was here a minute ago",
    " around here",
    ", should be close",
    ", it's probably on the floor",
)


def _find_sentence(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return command(rng, rng.choice(_FIND_VPS)) + rng.choice(_FIND_TAILS)
    return rng.choice(_FIND_SAYINGS) + rng.choice(_FIND_TAILS)


def find(rng: random.Random, lex: Lexicon) -> Example:
    x = phrase(rng, thing_name(rng, lex.objects, lex))
    instruction, names = write(rng, "drone", _find_sentence(rng), {"x": x})
    name = names["x"]
    if rng.random() < 0.35:
        scene = drone_scene(rng, lex, include=(name.lower(),))
        return _example(scene, instruction, f"o({_q(name)});a({_q(name)});tp();", "find_visible")
    return _example(
        drone_scene(rng, lex, exclude=(name.lower(),)),
        instruction,
        search_plan(name),
        "find_search",
    )


def check_either(rng: random.Random, lex: Lexicon) -> Example:
    first, second = (phrase(rng, thing_name(rng, lex.objects, lex, nonce=0.05)) for _ in range(2))
    pattern = rng.choice(
        (
            "is there {x} or {y} here?",
            command(rng, "look for {x} or {y}"),
            command(rng, "check for {x} or {y}"),
            command(rng, "check for either {x} or {y}"),
            command(rng, "find {x} or {y}, whichever you see"),
            "do we have {x} or {y} around?",
            "any sign of {x} or {y}?",
            "I need {x} or {y}, is either here?",
        )
    )
    instruction, names = write(rng, "drone", pattern, {"x": first, "y": second})
    a, b = names["x"], names["y"]
    if a.lower() == b.lower():
        return check_either(rng, lex)
    plan = f"?sw({_q(a)})==True{{tp();->True;}}?sw({_q(b)})==True{{tp();->True;}}->False;"
    return _example(
        drone_scene(rng, lex, exclude=(a.lower(), b.lower())), instruction, plan, "check_either"
    )


def _small_and_big(rng: random.Random, lex: Lexicon) -> tuple[Phrase, Phrase]:
    """An object, and the furniture it is on or under."""
    small = phrase(rng, thing_name(rng, lex.objects, lex))
    big = phrase(
        rng,
        thing_name(rng, lex.furniture, lex, nonce=0.03),
        (("the ", 8), ("my ", 1), ("that ", 1)),
    )
    return small, big


def check_on(rng: random.Random, lex: Lexicon) -> Example:
    small, big = _small_and_big(rng, lex)
    pattern = rng.choice(
        (
            "is {x} on {y}?",
            "is there {x} on {y}?",
            "did I leave {x} on {y}?",
            command(rng, "check whether {x} is on {y}"),
            command(rng, "see if {x} is on {y}"),
            command(rng, "check {y} for {x}"),
            command(rng, "look on {y} for {x}"),
            command(rng, "check the {x} on {y}"),
            "I think {x} is on {y}, can you check?",
            "{x} might be on {y}, have a look",
        )
    )
    instruction, names = write(rng, "drone", pattern, {"x": small, "y": big})
    x, y = names["x"], names["y"]
    plan = f"?sw({_q(y)})==True{{o({_q(y)});a({_q(y)});?iv({_q(x)})==True{{tp();}}}}"
    return _example(
        drone_scene(rng, lex, exclude=(x.lower(), y.lower())), instruction, plan, "check_on"
    )


def find_under(rng: random.Random, lex: Lexicon) -> Example:
    small, big = _small_and_big(rng, lex)
    pattern = rng.choice(
        (
            "is {x} under {y}?",
            command(rng, "look under {y} for {x}"),
            command(rng, "find {x} under {y}"),
            command(rng, "check under {y} for {x}"),
            "{x} rolled under {y}, can you look?",
            "I think {x} fell under {y}",
            "{x} is probably under {y}, check please",
        )
    )
    instruction, names = write(rng, "drone", pattern, {"x": small, "y": big})
    x, y = names["x"], names["y"]
    plan = f"?sw({_q(y)})==True{{a({_q(y)});md(50);?iv({_q(x)})==True{{tp();}}mu(50);}}"
    return _example(
        drone_scene(rng, lex, exclude=(x.lower(), y.lower())), instruction, plan, "find_under"
    )


def in_view(rng: random.Random, lex: Lexicon) -> Example:
    x = phrase(
        rng, thing_name(rng, lex.objects, lex), (("the ", 4), ("a ", 4), ("my ", 1), ("any ", 1))
    )
    pattern = rng.choice(
        (
            "can you see {x} right now?",
            "is {x} in view?",
            "do you see {x} from where you are?",
            "is {x} in front of you?",
            "is {x} visible to you right now",
            command(rng, "tell me if {x} is in view"),
            command(rng, "tell me whether you can see {x}"),
            command(rng, "report if {x} is in your view"),
            "is {x} in the picture?",
        )
    )
    instruction, names = write(rng, "drone", pattern, {"x": x})
    x_name = names["x"]
    return _example(drone_scene(rng, lex), instruction, f"_1=iv({_q(x_name)});lg(_1);", "in_view")


def report(rng: random.Random, lex: Lexicon) -> Example:
    x = phrase(rng, thing_name(rng, lex.objects, lex), (("the ", 6), ("my ", 1), ("that ", 1)))
    skill, pattern = rng.choice(
        (
            ("ox", "is {x} on the left or on the right?"),
            ("ox", "is {x} left or right of centre?"),
            ("ox", "where in the picture is {x}, left or right?"),
            ("oy", "is {x} high or low in the view?"),
            ("oy", "is {x} near the top or the bottom of the image?"),
            ("ow", "how wide is {x} in the picture?"),
            ("ow", "how wide does {x} look?"),
            ("oh", "how tall does {x} look?"),
            ("oh", "how tall is {x} in the image?"),
        )
    )
    instruction, names = write(rng, "drone", pattern, {"x": x})
    name = names["x"]
    scene = drone_scene(rng, lex, include=(name.lower(),))
    return _example(scene, instruction, f"_1={skill}({_q(name)});lg(_1);", "report")


def scan(rng: random.Random, lex: Lexicon) -> Example:
    x = phrase(rng, thing_name(rng, lex.objects, lex))
    pattern = command(
        rng,
        rng.choice(
            (
                "turn around until you see {x}",
                "rotate until {x} is in view",
                "spin until you spot {x}",
                "keep turning until {x} shows up",
                "turn in place till you find {x}",
                "pan around until you see {x}",
                "rotate slowly and stop when you see {x}",
            )
        ),
    )
    instruction, names = write(rng, "drone", pattern, {"x": x})
    name = names["x"]
    plan = f"8{{?iv({_q(name)})==True{{->True;}}tc(45);}}->False;"
    return _example(drone_scene(rng, lex, exclude=(name.lower(),)), instruction, plan, "scan")


def _side(rng: random.Random, sides: tuple[str, ...]) -> tuple[str, str]:
    side = rng.choice(sides)
    return side, rng.choice(_SIDE_WORDS[side])


def escape(side: str, distance: int) -> str:
    """Away from the side of the danger, then out of reach (down if it is above)."""
    if side in ("above", "below"):
        return f"{AWAY[side]}({distance});"
    return f"{AWAY[side]}({distance});mu(50);"


def hazard_person(rng: random.Random, lex: Lexicon) -> Example:
    who = Phrase(rng.choice(("a ", "a ", "the ", "some ")), rng.choice(lex.people))
    side, where = _side(rng, ("front", "left", "right", "behind"))
    pattern = rng.choice(
        (
            "{w} is walking into you {s}",
            "watch out, {w} {s}!",
            "careful, there's {w} {s}",
            "{w} is coming at you {s}, don't hurt them",
            "there's {w} {s} and they're getting close",
            "mind {w} {s}",
            "{w} {s} is about to walk into the drone",
            "avoid {w} approaching {s}",
            "{w} is reaching for you {s}",
            "{w} just stepped in {s}, keep them safe",
        )
    )
    instruction, _ = write(rng, "drone", pattern, {"w": who, "s": where})
    scene = drone_scene(rng, lex, include=(who.name,))
    return _example(scene, instruction, escape(side, 100), "urgent_person")


def hazard_obstacle(rng: random.Random, lex: Lexicon) -> Example:
    what = Phrase(
        rng.choice(("a ", "the ", "that ")), thing_name(rng, lex.furniture, lex, nonce=0.0)
    )
    side, where = _side(rng, tuple(_SIDE_WORDS))
    pattern = rng.choice(
        (
            "{w} {s}, you're about to hit it",
            "you're about to crash into {w} {s}",
            "you're too close to {w} {s}",
            "stop, {w} {s}",
            "collision warning: {w} {s}",
            "you're drifting into {w} {s}",
            "{w} is {s}, avoid hitting it",
            "careful, {w} {s}!",
            "there's {w} {s}, prevent a collision",
            "look out for {w} {s}",
        )
    )
    instruction, _ = write(rng, "drone", pattern, {"w": what, "s": where})
    scene = drone_scene(rng, lex, include=(what.name,))
    return _example(scene, instruction, f"{AWAY[side]}(80);", "urgent_collision")


def hazard_animal(rng: random.Random, lex: Lexicon) -> Example:
    animal = Phrase(rng.choice(("a ", "the ", "that ", "our ")), rng.choice(lex.animals))
    if rng.random() < 0.5:
        pattern = rng.choice(
            (
                "{w} is chasing you, get away",
                "{w} is after the drone!",
                "{w} is attacking you",
                "evade {w} that is pursuing you",
                "escape from {w}",
                "run, {w} wants to catch you",
                "{w} keeps jumping at you, get out of there",
            )
        )
        instruction, _ = write(rng, "drone", pattern, {"w": animal})
        plan = "mu(150);tc(180);mf(200);"
    else:
        side, where = _side(rng, tuple(_SIDE_WORDS))
        pattern = rng.choice(
            (
                "{w} is diving at you {s}",
                "{w} {s} is about to hit you",
                "watch out, {w} {s}!",
                "{w} is coming at you {s}",
            )
        )
        instruction, _ = write(rng, "drone", pattern, {"w": animal, "s": where})
        plan = escape(side, 100)
    scene = drone_scene(rng, lex, include=(animal.name,))
    return _example(scene, instruction, plan, "urgent_animal")


def _move_step(rng: random.Random) -> tuple[str, str]:
    """One movement as said, and its calls."""
    roll = rng.random()
    if roll < 0.55:
        skill = rng.choice(tuple(_MOVE_WORDS))
        amount = amounts.distance(rng)
        word = rng.choice(_MOVE_WORDS[skill])
        verb = rng.choice(_MOVE_VERBS)
        text = rng.choice(
            (
                f"{verb} {word} {amount.text}",
                f"{verb} {amount.text} {word}",
                f"{word} {amount.text}",
                f"{verb} {word} by {amount.text}",
                f"{verb} {word} about {amount.text}",
            )
        )
        if skill == "mu" and rng.random() < 0.3:
            text = f"{rng.choice(('climb', 'rise', 'ascend', 'gain'))} {amount.text}"
        elif skill == "md" and rng.random() < 0.3:
            text = f"{rng.choice(('descend', 'drop', 'sink', 'lower yourself'))} {amount.text}"
        elif skill == "mb" and rng.random() < 0.2:
            text = f"back up {amount.text}"
        return text, "".join(f"{skill}({d});" for d in amounts.drone_moves(amount.value))
    if roll < 0.8:
        skill = rng.choice(("tc", "tu"))
        amount = amounts.angle(rng)
        word = rng.choice(_TURN_WORDS[skill])
        verb = rng.choice(("turn", "rotate", "spin", "yaw", "turn"))
        text = rng.choice(
            (
                f"{verb} {word} {amount.text}",
                f"{verb} {amount.text} {word}",
                f"{verb} {word} by {amount.text}",
            )
        )
        return text, f"{skill}({amounts.angle_degrees(amount.value)});"
    return _simple_step(rng)


def _simple_step(rng: random.Random) -> tuple[str, str]:
    roll = rng.random()
    if roll < 0.25:
        return rng.choice(
            ("take off", "lift off", "get in the air", "launch", "take off now")
        ), "tk();"
    if roll < 0.45:
        return rng.choice(
            ("land", "touch down", "land now", "come down and land", "land right there")
        ), "ld();"
    if roll < 0.7:
        return rng.choice(
            (
                "take a picture",
                "snap a photo",
                "take a pic",
                "grab a shot",
                "take a photo",
                "get a photo",
                "photograph it",
            )
        ), "tp();"
    if roll < 0.85:
        return rng.choice(
            ("turn around", "do a 180", "face the other way", "turn back around")
        ), "tc(180);"
    amount = amounts.duration(rng)
    seconds = min(30.0, max(0.1, amount.value))
    text = rng.choice(
        (
            "hover for {}",
            "wait {}",
            "hold position for {}",
            "stay there for {}",
            "pause for {}",
            "hover {}",
        )
    )
    return text.format(amount.text), f"dl({amounts.plan_number(seconds)});"


_THEN = (
    ", then ",
    " then ",
    " and then ",
    " and ",
    ", ",
    "; ",
    ". then ",
    ", after that ",
    ", and ",
)


def sequence(rng: random.Random, lex: Lexicon) -> Example:
    """One to three movements, turns, take-offs, landings, pictures or waits, in order."""
    steps = [_move_step(rng) for _ in range(rng.choices((1, 2, 3), (4, 4, 2))[0])]
    text = steps[0][0]
    for step, _ in steps[1:]:
        text += rng.choice(_THEN) + step
    if len(steps) > 1 and rng.random() < 0.15:
        text = "first " + text
    instruction, _ = write(rng, "drone", command(rng, text) if rng.random() < 0.5 else text, {})
    return _example(drone_scene(rng, lex), instruction, "".join(p for _, p in steps), "motion")


def shape(rng: random.Random, lex: Lexicon) -> Example:
    amount = amounts.distance(rng)
    moves = amounts.drone_moves(amount.value)
    if len(moves) > 1:
        return shape(rng, lex)
    side = moves[0]
    if rng.random() < 0.5:
        kind, plan = "square", f"4{{mf({side});tc(90);}}"
    else:
        kind, plan = "triangle", f"3{{mf({side});tc(120);}}"
    vp = rng.choice(
        (
            f"fly a {kind} with sides of {amount.text}",
            f"fly a {amount.text} {kind}",
            f"patrol a {kind}, {amount.text} per side",
            f"trace a {kind} of {amount.text}",
            f"fly in a {kind} {amount.text} on each side",
            f"do a {kind} pattern with {amount.text} sides",
        )
    )
    instruction, _ = write(rng, "drone", command(rng, vp), {})
    return _example(drone_scene(rng, lex), instruction, plan, "shape")


_DRONE_CANNOT = (
    "play some music",
    "make coffee",
    "make me a sandwich",
    "wash the dishes",
    "do the laundry",
    "order a pizza",
    "call my mother",
    "send an email",
    "open the window",
    "unlock the door",
    "vacuum the floor",
    "water the plants",
    "feed the cat",
    "pick up {x}",
    "carry {x} upstairs",
    "bring me {x}",
    "fix {x}",
    "charge {x}",
    "clean {x}",
    "cook dinner",
    "turn on the oven",
    "buy some milk",
    "write my essay",
    "set an alarm",
    "fold the towels",
)


def refusal(rng: random.Random, lex: Lexicon) -> Example:
    """A request outside the drone's skills: say so, do nothing else."""
    instruction, plan = refusal_request(rng, "drone", lex, _DRONE_CANNOT)
    return _example(drone_scene(rng, lex), instruction, plan, "refusal")


def compound(rng: random.Random, lex: Lexicon) -> Example:
    """A search between simple steps: "take off, find my keys and land"."""
    before = [_simple_step(rng)] if rng.random() < 0.6 else []
    after = [_simple_step(rng)] if not before or rng.random() < 0.4 else []
    x = phrase(rng, thing_name(rng, lex.objects, lex))
    middle = rng.choice(_FIND_VPS)
    text = "".join(f"{t}{rng.choice(_THEN)}" for t, _ in before) + middle
    text += "".join(f"{rng.choice(_THEN)}{t}" for t, _ in after)
    instruction, names = write(rng, "drone", command(rng, text), {"x": x})
    name = names["x"]
    plan = "".join(p for _, p in before) + search_plan(name) + "".join(p for _, p in after)
    return _example(drone_scene(rng, lex, exclude=(name.lower(),)), instruction, plan, "compound")


DRONE_FRAMES: tuple[tuple[Frame, int], ...] = (
    (find, 8),
    (check_either, 2),
    (check_on, 2),
    (find_under, 2),
    (in_view, 2),
    (report, 1),
    (scan, 1),
    (hazard_person, 2),
    (hazard_obstacle, 2),
    (hazard_animal, 1),
    (sequence, 6),
    (compound, 2),
    (shape, 1),
    (refusal, 2),
)
"""(frame, relative weight)."""
