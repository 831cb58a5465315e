"""Chatbot mode (TimelyLLM §7): a reply is cut at sentence or paragraph ends, and
"executing" a segment means the user reading it at 300 words per minute.

It is a `PlanLanguage` like a robot's, so the service serves chat users with the
same segmentation, suspension and scheduling, and TUFs as for normal tasks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from timely_core.language.plan_language import PlanStatement

READING_WORDS_PER_MIN = 300.0
# A sentence ends at . ! ? (with closing quotes/brackets) followed by whitespace;
# a paragraph at a blank line.
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)|\n\s*\n")


@dataclass(frozen=True)
class Sentence:
    text: str


def reading_time_s(text: str, words_per_min: float = READING_WORDS_PER_MIN) -> float:
    return len(text.split()) * 60.0 / words_per_min


class SentenceParser:
    """Reports a sentence once the whitespace after its end has been decoded (before
    that, '3.' may still become '3.5'). Never rejects text."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, text: str) -> list[PlanStatement]:
        self._buffer += text
        sentences: list[PlanStatement] = []
        while True:
            start = len(self._buffer) - len(self._buffer.lstrip())
            match = _SENTENCE_END.search(self._buffer, start)
            if match is None:
                return sentences
            end = match.end()
            sentence = self._buffer[:end]
            self._buffer = self._buffer[end:]
            if sentence.strip():
                sentences.append(Sentence(sentence))

    def close(self) -> list[PlanStatement]:
        rest, self._buffer = self._buffer, ""
        return [Sentence(rest)] if rest.strip() else []


@dataclass(frozen=True)
class ChatLanguage:
    """The chat 'robot type'. `system_prompt` is the fixed prefix, prefilled once."""

    system_prompt: str = "You are a helpful assistant. Answer in short sentences.\n"
    words_per_min: float = READING_WORDS_PER_MIN
    robot_type: str = "chat"

    def prompt_prefix(self) -> str:
        return self.system_prompt

    def format_request(self, scene: str, instruction: str) -> str:
        context = f"Context: {scene}\n" if scene else ""
        return f"{context}User: {instruction}\nAssistant:"

    def new_parser(self) -> SentenceParser:
        return SentenceParser()

    def estimate_execution_s(self, statements: Sequence[PlanStatement]) -> tuple[float, float]:
        seconds = sum(reading_time_s(s.text, self.words_per_min) for s in statements)
        return seconds, seconds
