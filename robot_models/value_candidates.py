"""The values a request's stated amounts give each numeric skill argument, as a plan
writes them: the engine's copy bias favours them where the planner writes that
argument (`RobotPlanLanguage.request_values`).

An amount (amounts_said.py) becomes a candidate for every argument of its kind:
lengths for cm and mm arguments, angles for degrees, durations for seconds, and a
number said without a unit for any numeric argument, as said. The data generator's
policy (dataset/amounts.py) decides what a plan writes: a drone distance becomes
its moves (below 20 cm the smallest move, beyond 500 cm moves of 500 and the
rest), an angle is rounded and clamped into 1..360, a duration clamped into the
skill's range; anything else outside an argument's range is no candidate (the arm
refuses an unreachable position instead)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from robot_models.amounts_said import SaidAmount, amounts_said
from robot_models.dataset.amounts import angle_degrees, drone_moves, plan_number
from robot_models.skills import ArgSpec, SkillSet

_NUMERIC = ("int", "float")
_LENGTH_UNITS = {"cm": 1.0, "mm": 10.0}  # argument unit -> its units per cm


def request_values(skills: SkillSet, instruction: str) -> tuple[tuple[str, str], ...]:
    """(opener, value) pairs: a value the request gives a numeric argument, after
    the text that opens that argument (a skill's `(` for its first argument, `,`
    for a later one).

    A skill whose arguments are all numbers (the arm's `mt(x,y,z)`) takes the
    amounts as chains, by the coordinate letters said or else in the order said:
    its first argument the first amount of a position, each later one the next,
    opened by the value before it and `,` ("x 45 cm, y 20 cm, z 30 cm": `mt(` 450,
    `450,` 200, `200,` 300), so the second argument is not offered the third's
    value."""
    said = amounts_said(instruction)
    if not said:
        return ()
    pairs: dict[tuple[str, str], None] = {}
    for skill in skills.skills:
        calls = (f"{skill.short}(", f"{skill.name}(")
        chains = _chains(skill.args, said)
        for chain in chains:
            for opener in calls:
                pairs[(opener, chain[0])] = None
            for before, value in itertools.pairwise(chain):
                pairs[(f"{before},", value)] = None
        if chains:
            continue
        for position, arg in enumerate(skill.args):
            if arg.type not in _NUMERIC:
                continue
            for value in arg_values(arg, said):
                for opener in calls if position == 0 else (",",):
                    pairs[(opener, value)] = None
    return tuple(pairs)


def _chains(args: Sequence[ArgSpec], said: list[SaidAmount]) -> list[list[str]]:
    """The runs of consecutive amounts that fill every argument of an all-numeric
    call of 2 or more arguments, each as written for its argument; runs start at
    multiples of the call's size when the amounts are such a multiple (two
    positions said one after the other)."""
    size = len(args)
    if size < 2 or any(arg.type not in _NUMERIC for arg in args) or len(said) < size:
        return []
    names = [arg.name for arg in args]
    if any(amount.label in names for amount in said):
        labelled = _labelled_chains(args, said)
        if labelled:
            return labelled
    step = size if len(said) % size == 0 else 1
    runs = (said[start : start + size] for start in range(0, len(said) - size + 1, step))
    return [chain for run in runs if (chain := _chain(args, run)) is not None]


def _chain(args: Sequence[ArgSpec], amounts: Sequence[SaidAmount]) -> list[str] | None:
    """Each argument's one value from its amount, or None where an amount gives its
    argument none (outside its range, another kind)."""
    chain = [arg_values(arg, [amount]) for arg, amount in zip(args, amounts, strict=True)]
    return [values[0] for values in chain] if all(len(v) == 1 for v in chain) else None


def arg_values(arg: ArgSpec, said: list[SaidAmount]) -> list[str]:
    """The values `said` gives `arg`, written as a plan writes them, each once."""
    values: list[float] = []
    for amount in said:
        if amount.kind == "bare":
            values.append(amount.value)
        elif amount.kind == "length" and arg.unit in _LENGTH_UNITS:
            values.extend(_lengths(arg, amount.value))
        elif amount.kind == "angle" and arg.unit == "deg":
            values.append(float(angle_degrees(amount.value)))
        elif amount.kind == "duration" and arg.unit == "s":
            values.append(_clamped(arg, amount.value))
    written = [_written(arg, v) for v in values if _inside(arg, v)]
    return list(dict.fromkeys(written))


def _labelled_chains(args: Sequence[ArgSpec], said: list[SaidAmount]) -> list[list[str]]:
    """Positions whose amounts are labelled with the arguments' names ("x 350, y 0",
    "z=0.1m"): each labelled amount to its argument, the unlabelled ones of the same
    position to the arguments left, in order ("20 cm above the table at x 350, y 0"
    is z 200); a label said again starts the next position."""
    names = [arg.name for arg in args]
    positions: list[list[SaidAmount]] = [[]]
    for amount in said:
        if amount.label in names and any(a.label == amount.label for a in positions[-1]):
            positions.append([])
        positions[-1].append(amount)
    chains = []
    for amounts in positions:
        given = {a.label: a for a in amounts if a.label in names}
        rest = [a for a in amounts if a.label not in names]
        if len(given) + len(rest) != len(names):
            continue  # too few amounts for every argument, or too many
        filled = [given[name] if name in given else rest.pop(0) for name in names]
        chain = _chain(args, filled)
        if chain is not None:
            chains.append(chain)
    return chains


def _lengths(arg: ArgSpec, cm: float) -> list[float]:
    if arg.unit == "cm" and cm >= 0:  # a drone distance: the moves the plan makes
        return [float(move) for move in drone_moves(cm)]
    return [cm * _LENGTH_UNITS[arg.unit]]  # a coordinate: as said, signed


def _clamped(arg: ArgSpec, value: float) -> float:
    low = arg.min if arg.min is not None else value
    high = arg.max if arg.max is not None else value
    return min(max(value, low), high)


def _inside(arg: ArgSpec, value: float) -> bool:
    return arg.in_range(float(round(value)) if arg.type == "int" else value)


def _written(arg: ArgSpec, value: float) -> str:
    """As the plans write numbers: ints whole, floats with at most one decimal."""
    return plan_number(round(value) if arg.type == "int" else value)
