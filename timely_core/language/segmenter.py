"""Cuts a generation into segments at complete executable statements (TimelyLLM §4.1).

Each generated id is detokenized incrementally (`IncrementalDetokenizer`) and the
new text fed to the robot's `StreamingStatementParser`; when the parser reports one
or more complete statements, a `SegmentCut` holds the text up to the end of the
last of them. Text decoded past that end (the start of the next statement, when a
token straddles the boundary) opens the next segment, so the concatenated cuts
are exactly the decoded plan. A segment that grows past `max_segment_tokens`
without a statement, or text the parser rejects, raises `SegmentationError`: the
robot is never sent garbage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from timely_core.language.detokenizer import IncrementalDetokenizer
from timely_core.language.plan_language import PlanStatement, StreamingStatementParser


class SegmentationError(ValueError):
    """The generated text can never become a valid plan; the message says why."""


@dataclass(frozen=True)
class SegmentCut:
    text: str  # decoded text of the segment: previous leftover + up to its last statement
    statements: tuple[PlanStatement, ...]
    token_ids: tuple[int, ...]  # ids generated since the previous cut, through this one
    # ids the engine holds past the prompt at this cut's end (appended observations
    # included): where a rollback to it truncates; -1 when not recorded
    generated_end: int = -1
    # elements of its streamed call already delivered (serving/segment_dispatch.py)
    streamed_elements: int = 0


class Segmenter:
    def __init__(
        self,
        detokenizer: IncrementalDetokenizer,
        parser: StreamingStatementParser,
        max_segment_tokens: int,
    ) -> None:
        if max_segment_tokens < 1:
            raise ValueError(f"max_segment_tokens must be >= 1, got {max_segment_tokens}")
        self._detokenizer = detokenizer
        self._parser = parser
        self._max_segment_tokens = max_segment_tokens
        self._pending_text = ""  # decoded, not yet part of any cut
        self._pending_ids: list[int] = []
        self._text = ""  # everything decoded so far
        self._last_token_text = ""  # what the last pushed id decoded to

    @property
    def text(self) -> str:
        """The whole plan text decoded so far."""
        return self._text

    def push(self, token_id: int) -> SegmentCut | None:
        """Add one generated id; return a cut if it completed a statement."""
        self._pending_ids.append(token_id)
        delta = self._detokenizer.push(token_id)
        self._last_token_text = delta
        statements = self._feed(delta) if delta else []
        if statements:
            return self._cut(statements)
        if len(self._pending_ids) >= self._max_segment_tokens:
            raise SegmentationError(
                f"no complete statement within {self._max_segment_tokens} tokens "
                f"(decoded {self._pending_text[:80]!r})"
            )
        return None

    def push_text(self, text: str) -> SegmentCut | None:
        """Add text that no generated id of this segmenter produced (the end of a
        statement re-appended as input after a rollback); a cut if it completed one."""
        self._last_token_text = ""
        statements = self._feed(text) if text else []
        return self._cut(statements) if statements else None

    def close(self) -> SegmentCut | None:
        """End of generation: return the cut completed by the end itself, if any.
        Raises `SegmentationError` if the plan ends in the middle of a statement."""
        delta = self._detokenizer.flush()
        statements = self._feed(delta) if delta else []
        try:
            statements += list(self._parser.close())
        except ValueError as exc:
            raise SegmentationError(
                f"the plan ends in the middle of a statement: {exc} "
                f"(undispatched text {self._pending_text[:80]!r})"
            ) from exc
        if statements:
            return self._cut(statements, to_end=True)
        return None

    @property
    def max_segment_tokens(self) -> int:
        return self._max_segment_tokens

    @property
    def pending_tokens(self) -> int:
        """Ids decoded since the last cut (the segment being generated)."""
        return len(self._pending_ids)

    @property
    def last_token_text(self) -> str:
        """The text the last generated id decoded to ("" when it ended inside a
        character, or when text was pushed since)."""
        return self._last_token_text

    @property
    def trailing_text(self) -> str:
        """Decoded text after the last cut (whitespace at the end of a plan)."""
        return self._pending_text

    def _feed(self, delta: str) -> list[PlanStatement]:
        self._pending_text += delta
        self._text += delta
        try:
            return list(self._parser.feed(delta))
        except ValueError as exc:
            raise SegmentationError(
                f"invalid plan text: {exc} (decoded {self._pending_text[:80]!r})"
            ) from exc

    def _cut(self, statements: Sequence[PlanStatement], to_end: bool = False) -> SegmentCut:
        end = len(self._pending_text) if to_end else self._end_of(statements)
        cut = SegmentCut(
            text=self._pending_text[:end],
            statements=tuple(statements),
            token_ids=tuple(self._pending_ids),
        )
        self._pending_text = self._pending_text[end:]
        self._pending_ids = []
        return cut

    def _end_of(self, statements: Sequence[PlanStatement]) -> int:
        """Offset in the pending text just past the last statement; the whole pending
        text if the parser normalised a statement so it cannot be found verbatim."""
        cursor = 0
        for statement in statements:
            found = self._pending_text.find(statement.text, cursor)
            if found < 0:
                return len(self._pending_text)
            cursor = found + len(statement.text)
        return cursor
