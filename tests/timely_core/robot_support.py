"""Test support with the real robot plan languages (robot_models): the drone and arm
languages, a planner-style tokenizer trained on their prompts and the LRTrace
golden plans, and a script that replays those plans on the simulated engine."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from tokenizers import Tokenizer

from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS
from robot_models.language import load_language
from robot_models.training.tokenizer import train_tokenizer
from timely_core.language.plan_language import PlanLanguage


@lru_cache(maxsize=1)
def languages() -> dict[str, PlanLanguage]:
    return {t: load_language(t) for t in ("drone", "arm")}


@lru_cache(maxsize=1)
def tokenizer() -> Tokenizer:
    corpus = [lang.prompt_prefix() for lang in languages().values()]
    corpus += [t.golden_plan for t in LRTRACE_TASKS] + [t.scene for t in LRTRACE_TASKS]
    return train_tokenizer(corpus * 4, vocab_size=600)


def golden(prompt_ids: Sequence[int]) -> list[int]:
    prompt = tokenizer().decode(list(prompt_ids))
    for task in LRTRACE_TASKS:
        if task.instruction in prompt and task.scene in prompt:
            return tokenizer().encode(task.golden_plan, add_special_tokens=False).ids
    raise KeyError("no golden plan")
