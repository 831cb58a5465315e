"""The plans the simulated engine can produce: every request of the planner's data
set (the 11 LRTrace tasks and the templated examples) with its golden plan.

The simulated engine replays a known plan for a known request, the way LRTrace's
simulator does; a request it does not know fails that task with a clear error
(use the torch engine to plan free-form instructions).

Plans that react: after a failure observation (`RobotPlanLanguage.failure_observation`,
appended when a robot fails a segment) it retries the failed segment and goes on
with the rest of the known plan, the simplest sensible recovery; after a tool's
answer (an observation line that is no failure, `append_observations`) it goes on
with the rest of the known plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from robot_models.dataset import LRTRACE_TASKS, build_dataset
from robot_models.language import FAILED_MARK
from robot_models.recovery import retry_after_failure
from timely_core.language.plan_language import PlanLanguage
from timely_core.serving.robots import encode_request


class KnownPlans:
    def __init__(self, tokenizer: Any, languages: dict[str, PlanLanguage]) -> None:
        split = build_dataset()
        examples = [t.example() for t in LRTRACE_TASKS] + list(split.train) + list(split.heldout)
        self._plans: dict[tuple[int, ...], list[int]] = {}
        self._requests = {
            (ex.robot_type, ex.scene.strip(), ex.instruction.strip()) for ex in examples
        }
        for ex in examples:
            language = languages.get(ex.robot_type)
            if language is None:
                continue
            request = encode_request(tokenizer, language.format_request(ex.scene, ex.instruction))
            plan = list(tokenizer.encode(ex.plan, add_special_tokens=False).ids)
            self._plans.setdefault(tuple(request), plan)
        self._lengths = sorted({len(k) for k in self._plans}, reverse=True)
        self._tokenizer = tokenizer

    def knows(self, robot_type: str, scene: str, instruction: str) -> bool:
        """Whether a request has a known plan (checked at goal time by the node)."""
        return (robot_type, scene.strip(), instruction.strip()) in self._requests

    def __len__(self) -> int:
        return len(self._plans)

    def __call__(self, prompt_ids: Sequence[int]) -> Sequence[int]:
        for n in self._lengths:
            plan = self._plans.get(tuple(prompt_ids[-n:]))
            if plan is not None:
                return plan
        recovery = self._after_observation(prompt_ids)
        if recovery is not None:
            return recovery
        raise ValueError(
            "the simulated engine knows no plan for this request (it replays the data "
            "set's plans); use engine: torch for free-form instructions"
        )

    def _after_observation(self, ids: Sequence[int]) -> list[int] | None:
        """What follows a failure observation (the failed segment again, then the
        rest of the plan) or a tool's answer (the rest of the plan); None unless
        `ids` end with one of them after a known request."""
        found = self._request_end(ids)
        if found is None:
            return None
        end, plan = found
        known = self._tokenizer.decode(plan)
        written = without_answers(self._tokenizer.decode(list(ids[end:])))
        if written.endswith("\n"):
            rest = retry_after_failure(known, written)
        else:  # a tool's answer was the last observation
            rest = known[len(written) :] if known.startswith(written) else None
        if rest is None:
            return None
        return list(self._tokenizer.encode(rest, add_special_tokens=False).ids)

    def _request_end(self, ids: Sequence[int]) -> tuple[int, list[int]] | None:
        """Where the last known request in `ids` ends, and its plan."""
        for end in range(len(ids), 0, -1):
            for n in self._lengths:
                plan = self._plans.get(tuple(ids[end - n : end])) if n <= end else None
                if plan is not None:
                    return end, plan
        return None


def without_answers(written: str) -> str:
    """The plan text written so far without the tools' answers: each observation is
    a line of its own (`"\n" + observation + "\n"`, plans have no newline), and only
    failure observations stay (`retry_after_failure` reads them)."""
    kept = ""
    for index, piece in enumerate(written.split("\n")):
        if index % 2 == 0:
            kept += piece  # plan text
        elif FAILED_MARK in piece:
            kept += f"\n{piece}\n"
    return kept
