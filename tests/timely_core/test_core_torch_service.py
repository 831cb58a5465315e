"""The service on the real TorchEngine (a tiny random-weight Llama saved in HF format,
so it runs anywhere without the planner checkpoint): segmented generation with
suspend/resume under every handling strategy gives exactly the greedy output of the
engine driven straight through, for many concurrent robots, segments in order.

A random model writes no robot plan, so the robots here speak a "word" language
whose statements are whitespace-terminated words: any text is valid and nearly
every token ends a segment, which suspends and resumes the generation constantly.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.timely_core.core_support import eos_id, make_tokenizer
from timely_core.clock import MonotonicClock
from timely_core.engine.protocol import HandlingStrategy, SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.language.plan_language import PlanStatement
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.serving.robots import encode_prefix, encode_request

MAX_TOKENS = 24
INSTRUCTIONS = ["look for the cat", "evade the dog", "stack the boxes", "find the keys"]


@dataclass(frozen=True)
class Word:
    text: str


class WordParser:
    """A statement is a word once the whitespace after it arrives."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, text: str) -> list[PlanStatement]:
        self._buffer += text
        words: list[PlanStatement] = []
        while True:
            start = len(self._buffer) - len(self._buffer.lstrip())
            buffer = self._buffer
            end = next((i for i in range(start, len(buffer)) if buffer[i].isspace()), -1)
            if end < 0:
                return words
            words.append(Word(self._buffer[:end]))
            self._buffer = self._buffer[end:]

    def close(self) -> list[PlanStatement]:
        rest, self._buffer = self._buffer, ""
        return [Word(rest)] if rest.strip() else []


@dataclass(frozen=True)
class WordLanguage:
    robot_type: str = "words"

    def prompt_prefix(self) -> str:
        return "Skills: mf(cm) move forward, tl(deg) turn left, search(obj), say(text).\n"

    def format_request(self, scene: str, instruction: str) -> str:
        return f"Task: {instruction}\nPlan:"

    def new_parser(self) -> WordParser:
        return WordParser()

    def estimate_execution_s(self, statements: Sequence[PlanStatement]) -> tuple[float, float]:
        return 0.01 * len(statements), 0.01 * len(statements)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("tiny_llama")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=make_tokenizer().get_vocab_size(),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        eos_token_id=eos_id(),
        bos_token_id=eos_id(),
        initializer_range=0.2,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # make words end often: louder logits for tokens with a space
        tokenizer = make_tokenizer()
        for token_id in range(config.vocab_size):
            if " " in tokenizer.decode([token_id]) and token_id != eos_id():
                model.lm_head.weight[token_id] *= 4.0
    model.save_pretrained(path)
    return path


def unsegmented(path: Path) -> dict[str, str]:
    tokenizer = make_tokenizer()
    language = WordLanguage()
    engine = TorchEngine(path, EngineConfig())
    plans = {}
    for gen_id, instruction in enumerate(INSTRUCTIONS):
        prompt = encode_prefix(tokenizer, language.prompt_prefix()) + encode_request(
            tokenizer, language.format_request("", instruction)
        )
        engine.add(gen_id, prompt, SamplingParams(max_tokens=MAX_TOKENS))
        ids: list[int] = []
        finished = False
        while not finished:
            for out in engine.step([gen_id]):
                finished = out.finished
                if not (finished and out.token_id == engine.eos_token_id):
                    ids.append(out.token_id)
        plans[instruction] = tokenizer.decode(ids)
    return plans


def make_service(path: Path, strategy: HandlingStrategy, robots: int) -> PlanningService:
    service = PlanningService(
        TorchEngine(path, EngineConfig()),
        make_tokenizer(),
        policy="timely",
        clock=MonotonicClock(),
        config=ServiceConfig(
            max_tokens=MAX_TOKENS,
            max_segment_tokens=MAX_TOKENS + 1,  # a random model's words may be long
            handling_strategy=strategy,
        ),
    )
    for i in range(robots):
        service.register_robot(f"r{i}", WordLanguage())
    return service


@pytest.mark.parametrize(
    "strategy",
    [
        HandlingStrategy.PRESERVE,
        HandlingStrategy.SWAP,
        pytest.param(HandlingStrategy.DISCARD, marks=pytest.mark.slow),  # re-prefills: ~10 s
    ],
)
def test_suspend_resume_gives_the_unsegmented_greedy_output(
    checkpoint: Path, strategy: HandlingStrategy
) -> None:
    expected = unsegmented(checkpoint)
    service = make_service(checkpoint, strategy, robots=len(INSTRUCTIONS))
    handles = [
        service.submit(TaskRequest(robot_id=f"r{i}", instruction=instruction))
        for i, instruction in enumerate(INSTRUCTIONS)
    ]
    service.run_until_idle()
    for handle, instruction in zip(handles, INSTRUCTIONS, strict=True):
        result = handle.result(timeout_s=0)
        segments = list(handle.segments())
        assert result.success, result.error
        assert "".join(s.text for s in segments) == expected[instruction] == result.plan_text
        assert [s.index for s in segments] == list(range(len(segments)))
    assert service.stats().segments_emitted > 2 * len(INSTRUCTIONS)  # it did suspend often


@pytest.mark.slow
def test_twenty_concurrent_robots_on_the_background_thread(checkpoint: Path) -> None:
    expected = unsegmented(checkpoint)
    robots = 20
    service = make_service(checkpoint, HandlingStrategy.PRESERVE, robots)
    failures: list[str] = []

    def robot(i: int) -> None:
        instruction = INSTRUCTIONS[i % len(INSTRUCTIONS)]
        handle = service.submit(TaskRequest(robot_id=f"r{i}", instruction=instruction))
        texts, indices = [], []
        for segment in handle.segments(timeout_s=120):
            texts.append(segment.text)
            indices.append(segment.index)
            handle.segment_done(segment.index)
        result = handle.result(timeout_s=120)
        if not result.success or "".join(texts) != expected[instruction]:
            failures.append(f"r{i}: {result.error or ''.join(texts)!r}")
        if indices != list(range(len(indices))):
            failures.append(f"r{i}: out of order {indices}")

    service.start()
    threads = [threading.Thread(target=robot, args=(i,)) for i in range(robots)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
    finally:
        service.stop()
    assert not failures, "\n".join(failures)
    stats = service.stats()
    assert stats.succeeded == robots
    memory = service.engine.memory()
    assert memory.device_blocks_free == memory.device_blocks_total - memory.pinned_prefix_blocks
