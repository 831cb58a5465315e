"""Templates of drone tasks. Each returns an `Example` whose plan follows the
guidance in the drone prompt, so a plan is a function of scene and instruction."""

from __future__ import annotations

import random
from collections.abc import Callable

from robot_models.dataset.example import Example
from robot_models.dataset.vocabulary import (
    ANIMALS,
    AWAY_MOVE,
    DIRECTIONS,
    FURNITURE,
    HOUSEHOLD_OBJECTS,
    MOVE_WORDS,
    OBSTACLES,
    PEOPLE,
    SCENE_FILLERS,
    TOOLS_FOR_PURPOSE,
    TURN_WORDS,
)


def drone_scene(
    rng: random.Random, include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()
) -> str:
    """`visible: a, b, c` with the included objects at random places."""
    pool = [f for f in SCENE_FILLERS if f not in exclude and f not in include]
    items = rng.sample(pool, rng.randint(2, 4 - min(len(include), 2))) + list(include)
    rng.shuffle(items)
    return "visible: " + ", ".join(items)


def _example(scene: str, instruction: str, plan: str, family: str) -> Example:
    return Example("drone", scene, instruction, plan, family)


def search_plan(target: str) -> str:
    return f"?sw('{target}')==True{{o('{target}');a('{target}');tp();}}"


def find_object(rng: random.Random) -> Example:
    target = rng.choice(HOUSEHOLD_OBJECTS)
    phrase = rng.choice(
        (
            "Look for the {}",
            "Find the {}",
            "Search for the {}",
            "Where is the {}?",
            "Can you find my {}?",
            "Locate the {}",
        )
    )
    if rng.random() < 0.35:
        scene = drone_scene(rng, include=(target,))
        plan = f"o('{target}');a('{target}');tp();"
        return _example(scene, phrase.format(target), plan, "find_visible")
    scene = drone_scene(rng, exclude=(target,))
    return _example(scene, phrase.format(target), search_plan(target), "find_search")


def check_either(rng: random.Random) -> Example:
    first, second = rng.sample(HOUSEHOLD_OBJECTS, 2)
    phrase = rng.choice(("Check for {} or {}", "Is there a {} or a {} here?", "Look for {} or {}"))
    plan = f"?sw('{first}')==True{{tp();->True;}}?sw('{second}')==True{{tp();->True;}}->False;"
    return _example(
        drone_scene(rng, exclude=(first, second)),
        phrase.format(first, second),
        plan,
        "check_either",
    )


def check_on(rng: random.Random) -> Example:
    small = rng.choice(HOUSEHOLD_OBJECTS)
    big = rng.choice(FURNITURE)
    phrase = rng.choice(
        ("Check the {} on the {}", "Is the {} on the {}?", "Look at the {} on the {}")
    )
    plan = f"?sw('{big}')==True{{o('{big}');a('{big}');?iv('{small}')==True{{tp();}}}}"
    return _example(
        drone_scene(rng, exclude=(big, small)), phrase.format(small, big), plan, "check_on"
    )


def find_under(rng: random.Random) -> Example:
    small = rng.choice(HOUSEHOLD_OBJECTS)
    big = rng.choice(FURNITURE)
    phrase = rng.choice(
        ("Find a {} under the {}", "Look for the {} under the {}", "Is there a {} under the {}?")
    )
    plan = f"?sw('{big}')==True{{a('{big}');md(50);?iv('{small}')==True{{tp();}}mu(50);}}"
    return _example(
        drone_scene(rng, exclude=(big, small)), phrase.format(small, big), plan, "find_under"
    )


def find_tool(rng: random.Random) -> Example:
    purpose, tool = rng.choice(TOOLS_FOR_PURPOSE)
    phrase = rng.choice(("Find a tool for {}", "I need something for {}", "Look for a tool for {}"))
    return _example(
        drone_scene(rng, exclude=(tool,)), phrase.format(purpose), search_plan(tool), "find_tool"
    )


def avoid_person(rng: random.Random) -> Example:
    who, side = rng.choice(PEOPLE), rng.choice(DIRECTIONS)
    where = "from behind" if side == "behind" else f"from the {side}"
    phrase = rng.choice(
        (
            "A {} is walking into the drone {}, avoid hurting them",
            "Avoid injuring the {} approaching {}",
            "Watch out, a {} is coming {}, do not hurt them",
        )
    )
    plan = f"{AWAY_MOVE[side]}(100);mu(50);"
    return _example(
        drone_scene(rng, include=(who,)), phrase.format(who, where), plan, "urgent_person"
    )


def avoid_collision(rng: random.Random) -> Example:
    what, side = rng.choice(OBSTACLES), rng.choice(DIRECTIONS)
    distance = rng.choice((20, 30, 40, 50, 60))
    where = "behind the drone" if side == "behind" else f"{distance} cm to the {side}"
    if side == "front":
        where = f"{distance} cm ahead"
    phrase = rng.choice(
        (
            "A {} is {}, prevent a collision",
            "Collision warning: {} {}",
            "Stop, there is a {} {}, avoid hitting it",
        )
    )
    plan = f"{AWAY_MOVE[side]}(80);"
    return _example(
        drone_scene(rng, include=(what,)), phrase.format(what, where), plan, "urgent_collision"
    )


def evade_animal(rng: random.Random) -> Example:
    animal = rng.choice(ANIMALS)
    phrase = rng.choice(
        (
            "A {} is chasing the drone, get away",
            "Evade the {} that is pursuing you",
            "Escape from the {} running after the drone",
        )
    )
    plan = "mu(150);tc(180);mf(200);"
    return _example(
        drone_scene(rng, include=(animal,)), phrase.format(animal), plan, "urgent_animal"
    )


def _move_phrase(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.3:
        skill = rng.choice(tuple(TURN_WORDS))
        angle = (
            rng.choice((15, 30, 45, 60, 90, 120, 135, 180, 270, 360))
            if rng.random() < 0.6
            else rng.randint(1, 360)
        )
        word = rng.choice(TURN_WORDS[skill])
        text = rng.choice(("turn {} by {} degrees", "rotate {} {} degrees", "turn {} {} degrees"))
        return text.format(word, angle), f"{skill}({angle});"
    skill = rng.choice(tuple(MOVE_WORDS))
    distance = (
        rng.choice((20, 30, 50, 80, 100, 150, 200, 300))
        if rng.random() < 0.5
        else rng.randint(20, 500)
    )
    word = rng.choice(MOVE_WORDS[skill])
    text = rng.choice(("fly {} {} cm", "move {} by {} cm", "go {} {} cm"))
    return text.format(word, distance), f"{skill}({distance});"


def motion(rng: random.Random) -> Example:
    parts = [_move_phrase(rng) for _ in range(rng.randint(1, 3))]
    text = (
        ", then ".join(p[0] for p in parts)
        if rng.random() < 0.5
        else " and ".join(p[0] for p in parts)
    )
    instruction = text[0].upper() + text[1:]
    return _example(drone_scene(rng), instruction, "".join(p[1] for p in parts), "motion")


def fly_shape(rng: random.Random) -> Example:
    side = rng.choice((50, 80, 100, 120, 150, 200, 250, 300))
    if rng.random() < 0.5:
        phrase = rng.choice(("Fly a square with sides of {} cm", "Patrol a {} cm square"))
        plan = f"4{{mf({side});tc(90);}}"
    else:
        phrase = rng.choice(("Fly a triangle with sides of {} cm", "Patrol a {} cm triangle"))
        plan = f"3{{mf({side});tc(120);}}"
    return _example(drone_scene(rng), phrase.format(side), plan, "shape")


def scan_until(rng: random.Random) -> Example:
    target = rng.choice(HOUSEHOLD_OBJECTS)
    phrase = rng.choice(
        (
            "Turn around until you see the {}",
            "Rotate until the {} is in view",
            "Spin around and stop when you see the {}",
        )
    )
    plan = f"8{{?iv('{target}')==True{{->True;}}tc(45);}}->False;"
    return _example(drone_scene(rng, exclude=(target,)), phrase.format(target), plan, "scan")


def report_position(rng: random.Random) -> Example:
    target = rng.choice(HOUSEHOLD_OBJECTS)
    question, skill = rng.choice(
        (
            ("Is the {} on the left or on the right?", "ox"),
            ("Is the {} high or low in the view?", "oy"),
            ("How wide is the {} in the picture?", "ow"),
            ("How tall does the {} look?", "oh"),
        )
    )
    plan = f"_1={skill}('{target}');lg(_1);"
    return _example(drone_scene(rng, include=(target,)), question.format(target), plan, "report")


def takeoff_land(rng: random.Random) -> Example:
    height = rng.choice((30, 50, 80, 100, 120))
    seconds = rng.choice((1, 2, 3, 5, 1.5, 2.5, 0.5, 10))
    options = (
        ("Take off", "tk();"),
        ("Land now", "ld();"),
        ("Take off and take a picture", "tk();tp();"),
        (f"Take off, climb {height} cm and take a photo", f"tk();mu({height});tp();"),
        (f"Hover for {seconds} seconds and then land", f"dl({seconds});ld();"),
        (f"Wait {seconds} seconds, then take a picture", f"dl({seconds});tp();"),
        ("Take a picture", "tp();"),
    )
    instruction, plan = rng.choice(options)
    return _example(drone_scene(rng), instruction, plan, "takeoff_land")


DRONE_TEMPLATES: tuple[tuple[Callable[[random.Random], Example], int], ...] = (
    (find_object, 5),
    (check_either, 2),
    (check_on, 2),
    (find_under, 2),
    (find_tool, 2),
    (avoid_person, 2),
    (avoid_collision, 2),
    (evade_animal, 1),
    (motion, 4),
    (fly_shape, 1),
    (scan_until, 1),
    (report_position, 1),
    (takeoff_land, 1),
)
"""(template, relative weight)."""
