"""Scoring a plan against a natural-set annotation (`natural_eval.py`).

Four criteria, each implied by the next but the first two:
- valid: it parses completely and ended (as `plan_check.check_plan`);
- right skills: every called name is a skill of this robot type;
- grounded: valid, and every named object is some string argument of a skill
  (an object argument, not a `lg` message), compared case-insensitively;
- sensible: grounded, and the annotated skills, numbers, forbidden skills and
  first call are as the annotation requires.
An invalid plan is neither grounded nor sensible: the service would reject it.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot_models.language import load_language
from robot_models.natural_eval import NaturalEntry, NumberRequirement, alternatives
from robot_models.plan_ast import Literal, SkillCall, calls_in
from robot_models.plan_check import check_plan
from robot_models.skills import SkillSet


@dataclass(frozen=True)
class NaturalScore:
    valid: bool
    right_skills: bool
    grounded: bool
    sensible: bool
    problems: tuple[str, ...]  # why it is not sensible (empty when it is)


def score_plan(robot_type: str, entry: NaturalEntry, text: str, ended: bool = True) -> NaturalScore:
    """Score `text` (generation stopped at EOS when `ended`) against `entry`."""
    check = check_plan(robot_type, text, ended)
    if not check.valid:
        return NaturalScore(False, check.right_skills, False, False, (f"invalid: {check.error}",))
    language = load_language(robot_type)
    skill_set = language.skill_set
    calls = [c for s in language.parse(text) for c in calls_in(s.node)]
    called = {c.short for c in calls}
    arguments = {a.lower() for c in calls for a in _object_arguments(skill_set, c)}
    problems = [
        f"no object argument {choice!r}"
        for choice in entry.objects
        if not any(name.lower() in arguments for name in alternatives(choice))
    ]
    grounded = not problems
    problems += [
        f"no call of {choice}"
        for choice in entry.skills
        if not any(_short(skill_set, name) in called for name in alternatives(choice))
    ]
    problems += [
        f"no {n.skill} with {n.arg or 'its number'} {n.value:g} +- {n.tolerance:g}"
        for n in entry.numbers
        if not any(_number_matches(skill_set, n, c) for c in calls)
    ]
    problems += [
        f"calls forbidden {name}"
        for choice in entry.forbid
        for name in alternatives(choice)
        if _short(skill_set, name) in called
    ]
    if entry.first is not None:
        firsts = {_short(skill_set, name) for name in alternatives(entry.first)}
        if not calls:
            problems.append(f"no call at all, the first must be one of {entry.first}")
        elif calls[0].short not in firsts:
            problems.append(f"first call is {calls[0].short}, not one of {entry.first}")
    return NaturalScore(True, check.right_skills, grounded, not problems, tuple(problems))


def _short(skill_set: SkillSet, name: str) -> str:
    return skill_set.get(name).short


def _object_arguments(skill_set: SkillSet, call: SkillCall) -> list[str]:
    skill = skill_set.get(call.short)
    return [
        arg.value
        for spec, arg in zip(skill.args, call.args, strict=False)
        if spec.type == "str" and isinstance(arg, Literal) and isinstance(arg.value, str)
    ]


def _number_matches(skill_set: SkillSet, number: NumberRequirement, call: SkillCall) -> bool:
    if call.short not in {_short(skill_set, name) for name in alternatives(number.skill)}:
        return False
    skill = skill_set.get(call.short)
    numeric = [i for i, a in enumerate(skill.args) if a.type in ("int", "float")]
    named = [i for i, a in enumerate(skill.args) if a.name == number.arg]
    index = named[0] if number.arg else numeric[0]
    if index >= len(call.args):
        return False
    arg = call.args[index]
    if not isinstance(arg, Literal) or isinstance(arg.value, (bool, str)) or arg.value is None:
        return False
    return abs(float(arg.value) - number.value) <= number.tolerance


@dataclass
class NaturalTally:
    """Counts of plans meeting each criterion (one robot type, or several summed)."""

    plans: int = 0
    valid: int = 0
    right_skills: int = 0
    grounded: int = 0
    sensible: int = 0

    def add(self, score: NaturalScore) -> None:
        self.plans += 1
        self.valid += score.valid
        self.right_skills += score.right_skills
        self.grounded += score.grounded
        self.sensible += score.sensible

    def merged(self, other: NaturalTally) -> NaturalTally:
        return NaturalTally(
            self.plans + other.plans,
            self.valid + other.valid,
            self.right_skills + other.right_skills,
            self.grounded + other.grounded,
            self.sensible + other.sensible,
        )

    def rate(self, criterion: str) -> float:
        return float(getattr(self, criterion)) / max(1, self.plans)
