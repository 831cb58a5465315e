"""What the robot reports seeing: 0 to 6 items, the target among them or not."""

from __future__ import annotations

import random
from collections.abc import Sequence

from robot_models.dataset.lexicon import Lexicon

EMPTY_SCENE_SHARE = 0.1


def drone_scene(
    rng: random.Random,
    lexicon: Lexicon,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    empty_ok: bool = True,
) -> str:
    """`visible: a, b, c` with `include` at random places and none of `exclude`; now
    and then an empty scene (nothing recognised) when nothing must be included."""
    if not include and empty_ok and rng.random() < EMPTY_SCENE_SHARE:
        return ""
    taken = {w.lower() for w in (*include, *exclude)}
    pool = lexicon.furniture if rng.random() < 0.6 else lexicon.objects
    count = rng.randint(max(0, 1 - len(include)), 6 - len(include))
    items = [w for w in rng.sample(pool, min(len(pool), count + len(taken))) if w not in taken][
        :count
    ]
    items += list(include)
    rng.shuffle(items)
    return "visible: " + ", ".join(items) if items else ""


def arm_scene(on_table: Sequence[str], places: Sequence[str] = (), label: str = "places") -> str:
    """`on table: a, b; places: p, q` (places left out when there are none)."""
    scene = "on table: " + ", ".join(on_table)
    if places:
        scene += f"; {label}: " + ", ".join(places)
    return scene
