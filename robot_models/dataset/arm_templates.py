"""Templates of robot-arm tasks (plans of roughly 30 to 130 tokens)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

from robot_models.dataset.example import Example
from robot_models.dataset.vocabulary import (
    COLORS,
    DESK_CATEGORIES,
    FRUITS,
    HANDOVER_OBJECTS,
    SHAPES,
    VEGETABLES,
)

DESK_PLACES = "places: tray, holder, bin, shelf"
PRODUCE_BINS = "bins: fruit bin, vegetable bin"


def _example(scene: str, instruction: str, plan: str, family: str) -> Example:
    return Example("arm", scene, instruction, plan, family)


def guarded_move(obj: str, target: str) -> str:
    """Pick `obj` and place it on `target` only if `obj` is on the table."""
    return f"?lk('{obj}')==True{{pk('{obj}');pl('{target}');}}"


def desk_plan(objects: list[str]) -> str:
    where = {obj: place for place, objs in DESK_CATEGORIES.items() for obj in objs}
    return "hm();" + "".join(guarded_move(o, where[o]) for o in objects) + "hm();"


def desk_cleaning(rng: random.Random) -> Example:
    pool = [o for objs in DESK_CATEGORIES.values() for o in objs]
    objects = rng.sample(pool, rng.randint(3, 7))
    phrase = rng.choice(
        (
            "Clean the desk",
            "Tidy up the table",
            "Clear the desk please",
            "Put the things on the desk away",
            "Clean up the table",
        )
    )
    scene = f"on table: {', '.join(objects)}; {DESK_PLACES}"
    return _example(scene, phrase, desk_plan(objects), "desk")


def produce_plan(items: list[str]) -> str:
    sorts = "".join(
        f"?lk('{i}')==True{{so('{i}','{'fruit' if i in FRUITS else 'vegetable'} bin');}}"
        for i in items
    )
    return "hm();" + sorts + "hm();"


def produce_sorting(rng: random.Random) -> Example:
    items = rng.sample(FRUITS + VEGETABLES, rng.randint(3, 8))
    phrase = rng.choice(
        (
            "Sort the fruit and vegetables into the bins",
            "Classify the produce",
            "Separate fruit from vegetables",
            "Put the fruit and the vegetables in their bins",
        )
    )
    scene = f"on table: {', '.join(items)}; {PRODUCE_BINS}"
    return _example(scene, phrase, produce_plan(items), "produce")


def stack_plan(bottom_up: list[str]) -> str:
    steps = "".join(guarded_move(above, below) for below, above in itertools.pairwise(bottom_up))
    return "og();hm();" + steps + "hm();"


def stacking(rng: random.Random) -> Example:
    shape = rng.choice(SHAPES)
    blocks = [f"{c} {shape}" for c in rng.sample(COLORS, rng.randint(2, 6))]
    scene_order = blocks[:]
    rng.shuffle(scene_order)
    if len(blocks) == 2 and rng.random() < 0.5:
        instruction = f"Stack the {blocks[1]} on the {blocks[0]}"
    else:
        names = ", then ".join(b.split()[0] for b in blocks[1:])
        instruction = rng.choice(
            (
                f"Stack the {shape}s with {blocks[0].split()[0]} at the bottom, then {names}",
                f"Build a tower of {shape}s: {blocks[0].split()[0]} at the bottom, then {names}",
            )
        )
    return _example(f"on table: {', '.join(scene_order)}", instruction, stack_plan(blocks), "stack")


def quick_stack(rng: random.Random) -> Example:
    shape = rng.choice(SHAPES)
    top, bottom = (f"{c} {shape}" for c in rng.sample(COLORS, 2))
    phrase = rng.choice(
        ("Quickly put the {} on top of the {}", "Use the stack skill to put the {} on the {}")
    )
    return _example(
        f"on table: {top}, {bottom}",
        phrase.format(top, bottom),
        f"st('{top}','{bottom}');",
        "quick_stack",
    )


def move_to(rng: random.Random) -> Example:
    x, y, z = rng.randint(150, 750), rng.randint(-500, 500), rng.randint(0, 600)
    if rng.random() < 0.5:
        x, y, z = (
            rng.randrange(150, 751, 50),
            rng.randrange(-500, 501, 50),
            rng.randrange(0, 601, 50),
        )
    after = rng.choice(
        (("", ""), (" and open the gripper", "og();"), (" and close the gripper", "cg();"))
    )
    phrase = rng.choice(("Move the gripper to x {}, y {}, z {}", "Go to position x {} y {} z {}"))
    return _example(
        f"on table: {rng.choice(HANDOVER_OBJECTS)}",
        phrase.format(x, y, z) + after[0],
        f"mt({x},{y},{z});{after[1]}",
        "move_to",
    )


def pick_place(rng: random.Random) -> Example:
    obj = rng.choice(HANDOVER_OBJECTS + FRUITS[:4])
    target = rng.choice(("tray", "bin", "shelf", "box", "left corner", "right corner", "drawer"))
    phrase = rng.choice(("Put the {} in the {}", "Move the {} to the {}", "Place the {} on the {}"))
    plan = "hm();" + guarded_move(obj, target) + "hm();"
    return _example(
        f"on table: {obj}, {rng.choice(HANDOVER_OBJECTS)}",
        phrase.format(obj, target),
        plan,
        "pick_place",
    )


def handover(rng: random.Random) -> Example:
    obj, other = rng.sample(HANDOVER_OBJECTS, 2)
    phrase = rng.choice(("Hand me the {}", "Give me the {}", "Pass the {} to me"))
    plan = f"hm();?lk('{obj}')==True{{pk('{obj}');mt(400,0,300);og();}}hm();"
    return _example(f"on table: {other}, {obj}", phrase.format(obj), plan, "handover")


def check_present(rng: random.Random) -> Example:
    obj = rng.choice(HANDOVER_OBJECTS + FRUITS)
    phrase = rng.choice(("Is there a {} on the table?", "Check whether the {} is on the table"))
    return _example(
        f"on table: {rng.choice(HANDOVER_OBJECTS)}",
        phrase.format(obj),
        f"_1=lk('{obj}');lg(_1);",
        "check",
    )


def gripper(rng: random.Random) -> Example:
    instruction, plan = rng.choice(
        (
            ("Open the gripper", "og();"),
            ("Close the gripper", "cg();"),
            ("Go home", "hm();"),
            ("Open and close the gripper twice", "2{og();cg();}"),
            ("Open and close the gripper three times", "3{og();cg();}"),
            ("Release the object and go home", "og();hm();"),
        )
    )
    return _example(f"on table: {rng.choice(HANDOVER_OBJECTS)}", instruction, plan, "gripper")


ARM_TEMPLATES: tuple[tuple[Callable[[random.Random], Example], int], ...] = (
    (desk_cleaning, 4),
    (produce_sorting, 4),
    (stacking, 4),
    (quick_stack, 1),
    (move_to, 2),
    (pick_place, 2),
    (handover, 1),
    (check_present, 1),
    (gripper, 1),
)
"""(template, relative weight)."""
