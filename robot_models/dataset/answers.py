"""Training examples of plans shown a perception tool's answers (issue #23): after
each top-level statement that asks a perception skill about an object
(`?sw('cat')==True{...}`, `_1=ox('kettle');`), the answers as the service appends
them (`OBSERVATION_FORMAT` around each `lk('cup')->True`, in call order, as the
shipped perception tool writes them), then the rest of the plan unchanged.

The rest is the same whatever the answer: the plan's own conditions and variables
read the robot's answer when it runs the statement, so what the planner must learn
is to go on with its plan where it was, neither restarting nor repeating the
statement it was shown the answer of.
"""

from __future__ import annotations

import random
from functools import cache

from robot_models.dataset.example import Example
from robot_models.dataset.observations import OBSERVATION_FORMAT, plan_language
from robot_models.plan_ast import Literal, PlanStatement
from robot_models.skills import SkillSet

# How often a float answer is 0.0 (the object is not in view: the simulated world's
# answer, as a real detector's no-detection).
UNSEEN_FLOAT = 0.2


def with_answers(example: Example, rng: random.Random) -> Example | None:
    """`example` with the answers of its perception calls observed after their
    statements; None when it asks none about a named object (or already holds
    observations)."""
    if example.observed:
        return None
    pieces: list[tuple[str, bool]] = []
    cut = 0
    for statement in plan_language(example.robot_type).parse(example.plan):
        answers = [f"{call}->{_answer(kind, rng)}" for call, kind in _asked(example, statement)]
        if not answers:
            continue
        pieces.append((example.plan[cut : statement.end], False))
        pieces.append(("".join(OBSERVATION_FORMAT.format(observation=a) for a in answers), True))
        cut = statement.end
    if not pieces:
        return None
    pieces.append((example.plan[cut:], False))
    return example.with_pieces(pieces, f"{example.family}+answers")


def asks(example: Example) -> bool:
    """Whether the example's plan asks a perception skill about a named object."""
    statements = plan_language(example.robot_type).parse(example.plan)
    return any(_asked(example, s) for s in statements)


def answer_examples(examples: list[Example], fraction: float, rng: random.Random) -> list[Example]:
    """Answered variants of about `fraction` of `examples`, drawn at random (extra
    examples: the originals stay)."""
    chosen = [e for e in examples if rng.random() < fraction]
    return [a for a in (with_answers(e, rng) for e in chosen) if a is not None]


def _asked(example: Example, statement: PlanStatement) -> list[tuple[str, str]]:
    """(call text, return type) of the statement's perception calls on a literal
    object, in the order they are written (the order a tool answers them)."""
    returns = _perception_returns(example.robot_type)
    asked = []
    for call in statement.calls:
        kind = returns.get(call.short)
        if kind is None or len(call.args) != 1 or not isinstance(call.args[0], Literal):
            continue
        value = call.args[0].value
        if not isinstance(value, str) or "'" in value:
            continue
        asked.append((f"{call.short}('{value}')", kind))
    return asked


def _answer(kind: str, rng: random.Random) -> str:
    if kind == "bool":
        return str(rng.random() < 0.5)
    return "0.00" if rng.random() < UNSEEN_FLOAT else f"{rng.uniform(0.02, 0.98):.2f}"


@cache
def _perception_returns(robot_type: str) -> dict[str, str]:
    """Short name -> return type of the robot type's perception skills."""
    return {s.short: s.returns for s in SkillSet.load(robot_type).perception()}
