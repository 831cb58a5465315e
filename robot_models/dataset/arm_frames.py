"""Robot-arm task frames, realised in words by the surface grammar; the plan follows
the arm prompt's guidance from the frame and the scene alone."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

from robot_models.dataset import amounts
from robot_models.dataset.arm_templates import guarded_move
from robot_models.dataset.example import Example
from robot_models.dataset.lexicon import Lexicon
from robot_models.dataset.phrasing import command, phrase, refusal_request, thing_name, write
from robot_models.dataset.scenes import arm_scene
from robot_models.dataset.utterance import Phrase

Frame = Callable[[random.Random, Lexicon], Example]
DESK_PLACES = ("tray", "holder", "bin", "shelf")
PRODUCE_BINS = ("fruit bin", "vegetable bin")
HANDOVER_POSE = "mt(400,0,300);"
_SHAPES = ("cube", "block", "cylinder", "box", "brick", "cup", "ring")
_PLACES = (
    "tray",
    "bin",
    "shelf",
    "box",
    "drawer",
    "basket",
    "left corner",
    "right corner",
    "crate",
    "bowl",
)


def _example(scene: str, instruction: str, plan: str, family: str) -> Example:
    return Example("arm", scene, instruction, plan, family)


def _q(name: str) -> str:
    return f"'{name}'"


def _table(rng: random.Random, lex: Lexicon, include: list[str], extra: int = 2) -> list[str]:
    others = [o for o in rng.sample(lex.objects, extra + len(include)) if o not in include][:extra]
    items = others + include
    rng.shuffle(items)
    return items


def desk(rng: random.Random, lex: Lexicon) -> Example:
    """Every object on the table to the place of its kind, in scene order."""
    where = {obj: place for place, objs in lex.desk.items() for obj in objs}
    objects = rng.sample(sorted(where), rng.randint(2, 7))
    vp = rng.choice(
        (
            "clean the desk",
            "tidy up the table",
            "tidy up",
            "clear the desk",
            "clean up this mess",
            "put the stuff on the desk away",
            "put everything where it belongs",
            "sort out the desk",
            "make the desk neat",
            "clear off the table",
            "put all this away",
        )
    )
    pattern = (
        command(rng, vp)
        if rng.random() < 0.7
        else rng.choice(
            (
                "this desk is a mess",
                "the table is so cluttered",
                "my desk needs tidying",
                "can't work with this mess on the desk",
            )
        )
    )
    instruction, _ = write(rng, "arm", pattern, {})
    plan = "hm();" + "".join(guarded_move(o, where[o]) for o in objects) + "hm();"
    return _example(arm_scene(objects, DESK_PLACES), instruction, plan, "desk")


def produce(rng: random.Random, lex: Lexicon) -> Example:
    fruits, vegetables = set(lex.fruits), set(lex.vegetables)
    items = rng.sample(sorted(fruits | vegetables), rng.randint(2, 8))
    vp = rng.choice(
        (
            "sort the fruit and vegetables into the bins",
            "sort the produce",
            "separate the fruit from the veg",
            "put the fruit and the vegetables in their bins",
            "fruit in one bin, veggies in the other",
            "sort this produce into fruit and vegetables",
            "split up the fruit and vegetables",
            "bin the produce by type",
        )
    )
    instruction, _ = write(rng, "arm", command(rng, vp), {})
    sorts = "".join(
        f"?lk({_q(i)})==True{{so({_q(i)},'{'fruit' if i in fruits else 'vegetable'} bin');}}"
        for i in items
    )
    return _example(
        arm_scene(items, PRODUCE_BINS, "bins"), instruction, "hm();" + sorts + "hm();", "produce"
    )


def stack(rng: random.Random, lex: Lexicon) -> Example:
    shape = rng.choice(_SHAPES)
    colours = rng.sample(lex.colours, rng.randint(2, 5))
    blocks = [f"{c} {shape}" for c in colours]
    scene_order = blocks[:]
    rng.shuffle(scene_order)
    if len(blocks) == 2:
        pattern = command(
            rng,
            rng.choice(
                (
                    "stack {a} on {b}",
                    "put {a} on top of {b}",
                    "place {a} onto {b}",
                    "set {a} on {b}",
                )
            ),
        )
        instruction, names = write(
            rng, "arm", pattern, {"a": Phrase("the ", blocks[1]), "b": Phrase("the ", blocks[0])}
        )
        bottom_up = [names["b"], names["a"]]
    else:
        order = ", then ".join(colours[1:]) if rng.random() < 0.6 else ", ".join(colours[1:])
        vp = rng.choice(
            (
                f"stack the {shape}s with {colours[0]} at the bottom, then {order}",
                f"build a tower of {shape}s: {colours[0]} at the bottom, then {order}",
                f"make a {shape} tower, {colours[0]} first, then {order}",
                f"stack the {shape}s, {colours[0]} on the bottom, then {order}",
            )
        )
        instruction, _ = write(rng, "arm", command(rng, vp), {})
        if instruction.isupper():
            blocks = [b.upper() for b in blocks]
        bottom_up = blocks
    steps = "".join(guarded_move(above, below) for below, above in itertools.pairwise(bottom_up))
    return _example(arm_scene(scene_order), instruction, "og();hm();" + steps + "hm();", "stack")


def quick_stack(rng: random.Random, lex: Lexicon) -> Example:
    top, bottom = (phrase(rng, thing_name(rng, lex.objects, lex), (("the ", 1),)) for _ in range(2))
    pattern = rng.choice(
        (
            "quickly put {a} on top of {b}",
            "use the stack skill to put {a} on {b}",
            "just stack {a} on {b}, fast",
        )
    )
    instruction, names = write(rng, "arm", pattern, {"a": top, "b": bottom})
    a, b = names["a"], names["b"]
    if a.lower() == b.lower():
        return quick_stack(rng, lex)
    return _example(
        arm_scene([a.lower(), b.lower()]), instruction, f"st({_q(a)},{_q(b)});", "quick_stack"
    )


def move_to(rng: random.Random, lex: Lexicon) -> Example:
    text, (x, y, z) = amounts.arm_position(rng)
    reachable = 150 <= x <= 750 and -500 <= y <= 500 and 0 <= z <= 600
    after = rng.choice(
        (
            ("", ""),
            ("", ""),
            (" and open the gripper", "og();"),
            (" and close the gripper", "cg();"),
            (" then let go", "og();"),
            (", then grip", "cg();"),
        )
    )
    vp = rng.choice(
        (
            "move the gripper to {p}",
            "go to {p}",
            "move to {p}",
            "go to position {p}",
            "put the gripper at {p}",
            "position yourself at {p}",
            "move your hand to {p}",
            "take the tool to {p}",
        )
    )
    instruction, _ = write(rng, "arm", command(rng, vp + after[0]), {"p": text})
    scene = arm_scene(_table(rng, lex, [], extra=rng.randint(1, 3)))
    if not reachable:  # outside the workspace: say so, do not move
        return _example(scene, instruction, "lg('cannot reach that position');", "unreachable")
    return _example(scene, instruction, f"mt({x},{y},{z});{after[1]}", "move_to")


_PUT_VPS = (
    "put {x} in {p}",
    "put {x} on {p}",
    "move {x} to {p}",
    "place {x} on {p}",
    "drop {x} in {p}",
    "stick {x} in {p}",
    "take {x} and put it in {p}",
    "pick up {x} and place it on {p}",
    "grab {x} and drop it into {p}",
    "set {x} down on {p}",
)


def _place_phrase(rng: random.Random, lex: Lexicon) -> Phrase:
    head = rng.choice(_PLACES) if rng.random() < 0.6 else rng.choice(lex.objects)
    name = f"{rng.choice(lex.colours)} {head}" if rng.random() < 0.2 else head
    return Phrase(rng.choice(("the ", "the ", "that ", "my ")), name)


def pick_place(rng: random.Random, lex: Lexicon) -> Example:
    """One or two objects, each to its named place, in the order asked."""
    count = 1 if rng.random() < 0.7 else 2
    slots: dict[str, Phrase | str] = {}
    parts = []
    for i in range(count):
        slots[f"x{i}"] = phrase(
            rng, thing_name(rng, lex.objects, lex), (("the ", 6), ("my ", 1), ("that ", 1))
        )
        slots[f"p{i}"] = _place_phrase(rng, lex)
        parts.append(rng.choice(_PUT_VPS).replace("{x}", f"{{x{i}}}").replace("{p}", f"{{p{i}}}"))
    vp = (
        parts[0]
        if count == 1
        else parts[0] + rng.choice((" and ", ", then ", " and then ", ", ")) + parts[1]
    )
    instruction, names = write(rng, "arm", command(rng, vp), slots)
    objs = [names[f"x{i}"] for i in range(count)]
    if len({o.lower() for o in objs}) < count:
        return pick_place(rng, lex)
    plan = (
        "hm();"
        + "".join(guarded_move(names[f"x{i}"], names[f"p{i}"]) for i in range(count))
        + "hm();"
    )
    scene = arm_scene(_table(rng, lex, [o.lower() for o in objs], extra=rng.randint(0, 3)))
    return _example(scene, instruction, plan, "pick_place")


def handover(rng: random.Random, lex: Lexicon) -> Example:
    x = phrase(
        rng, thing_name(rng, lex.objects, lex), (("the ", 6), ("my ", 2), ("that ", 1), ("a ", 1))
    )
    pattern = rng.choice(
        (
            command(
                rng,
                rng.choice(
                    (
                        "hand me {x}",
                        "give me {x}",
                        "pass me {x}",
                        "pass {x} over",
                        "bring {x} over here",
                        "get me {x}",
                        "fetch {x} for me",
                        "hand {x} over",
                    )
                ),
            ),
            "can I have {x}?",
            "I need {x}",
            "I'd like {x}",
            "could I get {x}?",
            "{x}, please",
            "I could use {x}",
        )
    )
    instruction, names = write(rng, "arm", pattern, {"x": x})
    name = names["x"]
    plan = f"hm();?lk({_q(name)})==True{{pk({_q(name)});{HANDOVER_POSE}og();}}hm();"
    scene = arm_scene(_table(rng, lex, [name.lower()], extra=rng.randint(0, 3)))
    return _example(scene, instruction, plan, "handover")


def check_present(rng: random.Random, lex: Lexicon) -> Example:
    x = phrase(
        rng, thing_name(rng, lex.objects, lex), (("the ", 3), ("a ", 3), ("my ", 1), ("any ", 1))
    )
    pattern = rng.choice(
        (
            "is there {x} on the table?",
            "do you see {x}?",
            "is {x} still on the table?",
            "any {x} on the table?",
            command(rng, "check if {x} is there"),
            command(rng, "check whether {x} is on the table"),
            command(rng, "tell me if you can see {x}"),
            "did someone leave {x} on the table?",
        )
    )
    instruction, names = write(rng, "arm", pattern, {"x": x})
    name = names["x"]
    on_table = _table(
        rng, lex, [name.lower()] if rng.random() < 0.5 else [], extra=rng.randint(1, 3)
    )
    return _example(arm_scene(on_table), instruction, f"_1=lk({_q(name)});lg(_1);", "check")


_GRIPPER = (
    (("open the gripper", "open your hand", "let go", "release it", "open up"), "og();"),
    (("close the gripper", "close your hand", "grip", "clamp shut"), "cg();"),
    (
        (
            "go home",
            "return home",
            "go back to the home position",
            "back to home pose",
            "reset your position",
            "home position",
        ),
        "hm();",
    ),
    (("open and close the gripper twice", "open and shut the gripper two times"), "2{og();cg();}"),
    (("open and close the gripper three times",), "3{og();cg();}"),
    (
        ("release the object and go home", "let go and go home", "drop it and return home"),
        "og();hm();",
    ),
)


def gripper(rng: random.Random, lex: Lexicon) -> Example:
    phrases, plan = rng.choice(_GRIPPER)
    instruction, _ = write(rng, "arm", command(rng, rng.choice(phrases)), {})
    return _example(
        arm_scene(_table(rng, lex, [], extra=rng.randint(1, 3))), instruction, plan, "gripper"
    )


def hazard(rng: random.Random, lex: Lexicon) -> Example:
    """A person within reach: back to the home pose, nothing else."""
    who = rng.choice(lex.people)
    pattern = rng.choice(
        (
            "someone's hand is in the workspace",
            "a {w} is reaching for the gripper",
            "careful, a {w} is right next to you",
            "stop! there's a hand near the arm",
            "my fingers are by the gripper",
            "watch out, a {w} is leaning over the table",
            "a {w} just put their hand on the table",
            "there's a {w} too close to the arm",
            "someone is standing in your way",
            "hold on, a {w} is in the way",
        )
    )
    instruction, _ = write(rng, "arm", pattern, {"w": who})
    return _example(
        arm_scene(_table(rng, lex, [], extra=rng.randint(1, 3))), instruction, "hm();", "hazard"
    )


_ARM_CANNOT = (
    "fly to the kitchen",
    "walk the dog",
    "open the front door",
    "answer the phone",
    "make coffee",
    "play some music",
    "vacuum the floor",
    "go upstairs",
    "water the plants",
    "turn on the lights",
    "cook dinner",
    "take a photo of the room",
    "drive to the store",
    "call my mother",
    "wash {x}",
    "repair {x}",
    "paint {x}",
    "bring {x} from the other room",
)


def refusal(rng: random.Random, lex: Lexicon) -> Example:
    """A request outside the arm's skills: say so, do nothing else."""
    instruction, plan = refusal_request(rng, "arm", lex, _ARM_CANNOT)
    scene = arm_scene(_table(rng, lex, [], extra=rng.randint(1, 3)))
    return _example(scene, instruction, plan, "refusal")


ARM_FRAMES: tuple[tuple[Frame, int], ...] = (
    (desk, 3),
    (produce, 3),
    (stack, 3),
    (quick_stack, 1),
    (move_to, 3),
    (pick_place, 4),
    (handover, 3),
    (check_present, 2),
    (gripper, 1),
    (hazard, 2),
    (refusal, 2),
)
"""(frame, relative weight)."""
