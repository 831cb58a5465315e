"""Test support for timely_core: a tiny plan language, a byte-level BPE tokenizer
trained in memory, and a PlanningService on the simulated engine in virtual time.

The language mimics the robot languages' shape (`name(args);` statements, skills
with argument-dependent execution times) without importing robot_models.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import (
    SimulatedEngine,
    SimulatedEngineConfig,
)
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090, LatencyModel
from timely_core.language.plan_language import PlanStatement
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.task_handle import TaskHandle

EOS = "<eos>"
_STATEMENT = re.compile(r"\s*([a-z_]+)\(([^();]*)\);")
_PREFIX_OK = re.compile(r"\s*([a-z_]*|[a-z_]+\([^();]*|[a-z_]+\([^();]*\))")

CORPUS = [
    "mf(50); tl(90); search('cat'); say('found it');",
    "mu(30); md(30); mf(100); tr(45); search('keys'); search('wallet');",
    "pick('red_box'); place('red_box', 'blue_box'); pick('cyan_box');",
    "say('chat réponse: déjà vu, 猫 и кот'); wait(2);",
    "Skills: mf(cm) move forward, tl(deg) turn left, search(obj), say(text).",
    "Task: look for the cat\nPlan:",
    "Hello there. I am a robot! Are you sure?\n\nNew paragraph here.",
]


@lru_cache(maxsize=1)
def make_tokenizer() -> Tokenizer:
    """Byte-level BPE with a small vocabulary, so multi-byte characters are split
    across tokens and statements across token boundaries."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=330,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 20, trainer)
    return tokenizer


def eos_id() -> int:
    token = make_tokenizer().token_to_id(EOS)
    assert token is not None
    return token


@dataclass(frozen=True)
class Statement:
    text: str
    skill: str
    argument: str


class StatementParser:
    """`name(args);` statements; rejects text that can never become one."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, text: str) -> list[PlanStatement]:
        self._buffer += text
        done: list[PlanStatement] = []
        while True:
            match = _STATEMENT.match(self._buffer)
            if match is None:
                break
            done.append(Statement(match.group(0).lstrip(), match.group(1), match.group(2)))
            self._buffer = self._buffer[match.end() :]
        if not _PREFIX_OK.fullmatch(self._buffer):
            raise ValueError(f"not a statement: {self._buffer[:40]!r}")
        return done

    def close(self) -> list[PlanStatement]:
        if self._buffer.strip():
            raise ValueError(f"unterminated statement {self._buffer.strip()[:40]!r}")
        return []


# Minimum execution time per skill (seconds); search varies, its minimum is used.
SKILL_MIN_S = {"mf": 0.02, "mu": 0.02, "md": 0.02, "tl": 1 / 90, "tr": 1 / 90}


@dataclass(frozen=True)
class TinyLanguage:
    robot_type: str = "tiny"
    prefix: str = "Skills: mf(cm) move forward, tl(deg) turn left, search(obj), say(text).\n"

    def prompt_prefix(self) -> str:
        return self.prefix

    def format_request(self, scene: str, instruction: str) -> str:
        return f"Scene: {scene}\nTask: {instruction}\nPlan:"

    def new_parser(self) -> StatementParser:
        return StatementParser()

    def estimate_execution_s(self, statements: Sequence[PlanStatement]) -> tuple[float, float]:
        low = mean = 0.0
        for statement in statements:
            assert isinstance(statement, Statement)
            if statement.skill in SKILL_MIN_S:
                seconds = SKILL_MIN_S[statement.skill] * float(statement.argument or 0)
                low, mean = low + seconds, mean + seconds
            elif statement.skill == "search":
                low, mean = low + 2.0, mean + 4.0
            else:
                low, mean = low + 0.5, mean + 0.5
        return low, mean


def plan_script(plans: Mapping[str, str]) -> Callable[[Sequence[int]], list[int]]:
    """Script for the simulated engine: the plan of the instruction in the prompt."""
    tokenizer = make_tokenizer()

    def script(prompt_ids: Sequence[int]) -> list[int]:
        prompt = tokenizer.decode(list(prompt_ids))
        found = [task for task in plans if f" {task}\n" in prompt]
        if not found:
            raise KeyError(f"no scripted plan for the prompt ending {prompt[-40:]!r}")
        task = max(found, key=len)
        return tokenizer.encode(plans[task], add_special_tokens=False).ids

    return script


PAPER_LATENCY = PAPER_LLAMA3_8B_RTX4090


def make_service(
    plans: Mapping[str, str],
    policy: str = "timely",
    robots: Sequence[str] = ("drone1",),
    latency: LatencyModel = PAPER_LATENCY,
    config: ServiceConfig | None = None,
    engine_config: SimulatedEngineConfig | None = None,
) -> tuple[PlanningService, VirtualClock, SimulatedEngine]:
    clock = VirtualClock()
    tokenizer = make_tokenizer()
    engine = SimulatedEngine(
        clock,
        latency,
        plan_script(plans),
        engine_config or SimulatedEngineConfig(eos_token_id=eos_id()),
    )
    service = PlanningService(engine, tokenizer, policy=policy, clock=clock, config=config)
    for robot in robots:
        service.register_robot(robot, TinyLanguage())
    return service, clock, engine


def run_reporting_segments(service: PlanningService, handle: TaskHandle) -> None:
    """Run the service until the task ends, its robot reporting each segment done
    as soon as it is dispatched (the service's clock, now)."""
    generation = service._state.generations[handle.task_id]
    while not handle.done():
        service.run_until_idle()
        for record in generation.records:
            if record.finished_at_s is None:
                handle.segment_done(record.segment.index)
