"""The values a request gives each numeric argument (value_candidates.py), as the
robot languages list them for the engine's copy bias: the generator's policy on
ranges (drone moves split or raised to the smallest, angles and durations
clamped, coordinates outside the workspace left out), plans' number format, and
the arm's positions as chains, by the coordinate letters said or in the order said."""

from __future__ import annotations

import random

from robot_models.dataset import amounts
from robot_models.language import load_language

DRONE = load_language("drone")
ARM = load_language("arm")


def values_after(pairs: tuple[tuple[str, str], ...], opener: str) -> set[str]:
    return {value for before, value in pairs if before == opener}


def test_drone_lengths_angles_and_durations_go_to_their_arguments() -> None:
    pairs = DRONE.request_values("", "climb 1.5 m, turn 45° and hover 3 seconds")
    assert values_after(pairs, "mu(") == {"150"}
    assert values_after(pairs, "move_up(") == {"150"}  # the skill's long name too
    assert values_after(pairs, "tc(") == {"45"}
    assert values_after(pairs, "dl(") == {"3"}
    assert "150" not in values_after(pairs, "tc(")  # a length is no angle


def test_the_generators_policy_decides_what_a_plan_writes() -> None:
    assert values_after(DRONE.request_values("", "go up 5 cm"), "mu(") == {"20"}
    assert values_after(DRONE.request_values("", "go forward 8 m"), "mf(") == {"500", "300"}
    assert values_after(DRONE.request_values("", "turn 400 degrees"), "tc(") == {"360"}
    assert values_after(DRONE.request_values("", "wait 2 minutes"), "dl(") == {"30"}
    assert values_after(DRONE.request_values("", "wait 0.5 s"), "dl(") == {"0.5"}
    assert values_after(DRONE.request_values("", "move left 3 feet"), "ml(") == {"91"}


def test_a_bare_number_goes_to_every_argument_that_can_take_it() -> None:
    pairs = DRONE.request_values("", "up 80 then rotate 90")
    assert values_after(pairs, "mu(") == {"80", "90"}
    assert values_after(pairs, "tu(") == {"80", "90"}
    assert values_after(pairs, "dl(") == set()  # above the delay's 30 s


def test_arm_positions_are_chains_in_the_order_said() -> None:
    pairs = ARM.request_values("", "move the gripper to x 55 cm, y -10 cm, z 35 cm")
    assert set(pairs) == {("mt(", "550"), ("move_to(", "550"), ("550,", "-100"), ("-100,", "350")}
    two = ARM.request_values("", "go to 200, 200, 200 then 600, -200, 200")
    assert values_after(two, "mt(") == {"200", "600"}
    assert values_after(two, "600,") == {"-200"}
    # a coordinate outside the workspace breaks the chain: each argument on its own
    loose = ARM.request_values("", "go to 10, 40, 10 cm")
    assert values_after(loose, "mt(") == {"400"}
    assert values_after(loose, ",") == {"100", "400"}


def test_coordinates_named_by_letter_go_to_their_arguments() -> None:
    pairs = ARM.request_values("", "z 300, x 400, y 0")
    assert set(pairs) == {("mt(", "400"), ("move_to(", "400"), ("400,", "0"), ("0,", "300")}
    # the one amount without a letter fills the argument left: z
    above = ARM.request_values("", "hover 20 cm over the bench at x 350, y -50")
    assert set(above) == {("mt(", "350"), ("move_to(", "350"), ("350,", "-50"), ("-50,", "200")}


def test_every_position_the_generator_writes_inside_the_workspace_is_a_chain() -> None:
    rng = random.Random(3)
    (x_range, y_range, z_range) = amounts.ARM_WORKSPACE_MM
    checked = 0
    for _ in range(400):
        text, (x, y, z) = amounts.arm_position(rng)
        inside = all(
            lo <= v <= hi
            for v, (lo, hi) in zip((x, y, z), (x_range, y_range, z_range), strict=True)
        )
        if not inside:
            continue
        pairs = set(ARM.request_values("", f"move to {text}"))
        assert {("mt(", str(x)), (f"{x},", str(y)), (f"{y},", str(z))} <= pairs, text
        checked += 1
    assert checked > 300


def test_a_request_without_amounts_gives_none() -> None:
    assert DRONE.request_values("visible: 3 chairs", "find my keys") == ()
    assert ARM.request_values("", "hand me the 9 volt battery") == ()
