"""Training examples of plans that react (issue #23): a robot's failure of one
segment appended to the plan exactly as the service appends it
(`OBSERVATION_FORMAT` around `RobotPlanLanguage.failure_observation`), and the
recovery the planner should write after it.

The recovery policy, by what the robot's error says (`FAILURE_KINDS`):
- the robot cannot go on (battery, motor, emergency stop, a collision): report and
  stop safely, `lg('stopped: <reason>');` then `ld();` for a drone in the air or
  `hm();` for the arm; nothing of the plan after it;
- an obstacle on a drone's level move: go over it, `mu(50);` + the move + `md(50);`,
  then the rest of the plan;
- a grasp that did not hold (arm): open the gripper and pick again, then the rest;
- the object is not there (arm): `lg('cannot find <object>');hm();` and stop;
- anything else (a timeout, an unacknowledged command, an unknown error): retry the
  failed statement once, then the rest.
The same statement failing again after its recovery: report and stop safely.

The observations are input, not planner output: `Example.observed` marks their
characters so training never learns to write them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from robot_models.dataset.example import Example
from robot_models.language import RobotPlanLanguage, load_language
from robot_models.plan_ast import Literal

# How the service appends an observation to a generation (timely_core's
# `tools.router.OBSERVATION_FORMAT`; robot_models does not import the serving core,
# and a test checks the two agree).
OBSERVATION_FORMAT = "\n{observation}\n"
LEVEL_MOVES = ("mf", "mb", "ml", "mr")
# How often each kind of failure is drawn where it applies: most robot errors are
# transient; a fault that ends the task is the rarest.
KIND_WEIGHTS = {"retry": 5, "go_over": 3, "regrasp": 2, "not_found": 1, "stop": 2}


@dataclass(frozen=True)
class FailureKind:
    name: str
    errors: tuple[str, ...]  # how robots word it (some with a {short} or {target})
    skills: frozenset[str] | None  # the skills it can follow (None: any)
    reason: str = ""  # for `lg('stopped: <reason>')`


FAILURE_KINDS: dict[str, tuple[FailureKind, ...]] = {
    "drone": (
        FailureKind(
            "stop",
            (
                "battery low",
                "battery critical (7%)",
                "error Motor stop",
                "motor fault",
                "emergency stop",
                "IMU error",
                "low battery, cannot continue",
            ),
            None,
            "robot fault",
        ),
        FailureKind(
            "go_over",
            (
                "obstacle ahead",
                "obstacle detected 40 cm ahead",
                "path blocked",
                "proximity sensor triggered",
                "something is in the way",
            ),
            frozenset(LEVEL_MOVES),
        ),
        FailureKind(
            "retry",
            (
                "timeout",
                "error",
                "no response from the drone",
                "command not acknowledged",
                "Command was unsuccessful for 4 tries. Latest response: 'error'",
                "injected failure of {short}",
                "connection lost, reconnected",
            ),
            None,
        ),
    ),
    "arm": (
        FailureKind(
            "stop",
            (
                "emergency stop pressed",
                "collision detected",
                "joint 3 over torque",
                "servo fault",
                "protective stop",
            ),
            None,
            "robot fault",
        ),
        FailureKind(
            "regrasp",
            ("grasp failed", "object slipped from the gripper", "gripper closed on nothing"),
            frozenset({"pk"}),
        ),
        FailureKind(
            "not_found",
            ("object not found", "{target} not detected", "nothing to pick at {target}"),
            frozenset({"pk"}),
        ),
        FailureKind(
            "retry",
            (
                "timeout",
                "trajectory aborted",
                "command not acknowledged",
                "planning failed, retry possible",
                "injected failure of {short}",
            ),
            None,
        ),
    ),
}


def with_failure(example: Example, rng: random.Random, twice: float = 0.25) -> Example | None:
    """`example` with one of its top-level statements failed and recovered (and with
    probability `twice`, failed again after a retry and stopped); None when its plan
    has no statement that can fail (only `lg` calls)."""
    language = plan_language(example.robot_type)
    statements = language.parse(example.plan)
    candidates = [s for s in statements if s.calls and not all(c.short == "lg" for c in s.calls)]
    if not candidates:
        return None
    failed = rng.choice(candidates)
    first = failed.calls[0]
    kinds = [
        k
        for k in FAILURE_KINDS[example.robot_type]
        if k.skills is None or (first.short in k.skills and len(failed.calls) == 1)
    ]
    kind = rng.choices(kinds, [KIND_WEIGHTS[k.name] for k in kinds])[0]
    before, rest = example.plan[: failed.end], example.plan[failed.end :]
    target = next(
        (a.value for a in first.args if isinstance(a, Literal) and isinstance(a.value, str)),
        "it",
    )
    error = rng.choice(kind.errors).format(short=first.short, target=target)
    airborne = first.short != "tk" and _airborne(example.robot_type, before[: failed.start])
    pieces: list[tuple[str, bool]] = [
        (before, False),
        (_observe(language, failed.text, error), True),
    ]
    if kind.name == "stop":
        pieces.append((_stop(example.robot_type, kind.reason, airborne, first.short), False))
    elif kind.name == "not_found":
        pieces.append((f"lg('cannot find {target}');hm();", False))
    elif kind.name in ("retry", "go_over", "regrasp") and rng.random() < twice:
        retry = next(k for k in FAILURE_KINDS[example.robot_type] if k.name == "retry")
        again = rng.choice(retry.errors)
        retried = _retry(kind.name, failed.text)  # up to the statement that fails again
        pieces += [
            (retried[: retried.rindex(failed.text) + len(failed.text)], False),
            (_observe(language, failed.text, again.format(short=first.short)), True),
            (
                _stop(example.robot_type, f"{first.short} failed twice", airborne, first.short),
                False,
            ),
        ]
    else:
        pieces.append((_retry(kind.name, failed.text) + rest, False))
    return example.with_pieces(pieces, f"{example.family}+{kind.name}")


@cache
def plan_language(robot_type: str) -> RobotPlanLanguage:
    """One language per robot type for parsing plans (built once: it reads files)."""
    return load_language(robot_type)


def _observe(language: RobotPlanLanguage, statement: str, error: str) -> str:
    return OBSERVATION_FORMAT.format(observation=language.failure_observation(statement, error))


def _retry(kind: str, statement: str) -> str:
    if kind == "go_over":
        return f"mu(50);{statement}md(50);"
    if kind == "regrasp":
        return f"og();{statement}"
    return statement


def _stop(robot_type: str, reason: str, airborne: bool, failed_short: str) -> str:
    report = f"lg('stopped: {reason}');"
    if robot_type == "arm":
        return report + "hm();"
    return report + ("ld();" if airborne and failed_short != "ld" else "")


def _airborne(robot_type: str, plan_before: str) -> bool:
    """Whether the drone has taken off (and not landed) in the plan so far; a plan
    written for a drone already flying (no `tk` at all) counts as in the air."""
    if robot_type != "drone":
        return False
    took_off, landed = plan_before.rfind("tk();"), plan_before.rfind("ld();")
    if took_off < 0 and landed < 0:
        return True
    return took_off > landed


def failure_examples(examples: list[Example], fraction: float, rng: random.Random) -> list[Example]:
    """Failure variants of about `fraction` of `examples`, drawn at random (extra
    examples: the originals stay)."""
    chosen = [e for e in examples if rng.random() < fraction]
    return [f for f in (with_failure(e, rng) for e in chosen) if f is not None]
