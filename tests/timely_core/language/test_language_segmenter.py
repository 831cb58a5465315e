"""Segments end at complete statements (also when a token straddles the end), their
texts concatenate to the plan, and text that can never be valid is an error."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer

from tests.timely_core.core_support import StatementParser, make_tokenizer
from timely_core.language.chat_language import ChatLanguage, SentenceParser, reading_time_s
from timely_core.language.detokenizer import IncrementalDetokenizer
from timely_core.language.plan_language import StreamingStatementParser
from timely_core.language.segmenter import SegmentationError, SegmentCut, Segmenter

PLAN = "mf(50); tl(90); search('cat'); say('猫 found');"


def segment(
    text: str, max_segment_tokens: int = 64, parser: StreamingStatementParser | None = None
) -> tuple[list[SegmentCut], Segmenter, list[int]]:
    tokenizer = make_tokenizer()
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    segmenter = Segmenter(
        IncrementalDetokenizer(tokenizer), parser or StatementParser(), max_segment_tokens
    )
    cuts: list[SegmentCut] = []
    for token in ids:
        cut = segmenter.push(token)
        if cut is not None:
            cuts.append(cut)
    tail = segmenter.close()
    if tail is not None:
        cuts.append(tail)
    return cuts, segmenter, ids


def test_one_segment_per_statement_in_order() -> None:
    cuts, segmenter, ids = segment(PLAN)
    assert [c.text for c in cuts] == ["mf(50);", " tl(90);", " search('cat');", " say('猫 found');"]
    assert [c.statements[0].text for c in cuts] == [c.text.lstrip() for c in cuts]
    assert "".join(c.text for c in cuts) == PLAN == segmenter.text
    assert [t for c in cuts for t in c.token_ids] == ids


def test_statement_end_inside_a_token_leaves_the_rest_to_the_next_segment() -> None:
    tokenizer = Tokenizer.from_str(make_tokenizer().to_str())
    tokenizer.add_tokens([");md("])  # one token spanning the end of a statement
    ids = tokenizer.encode("mu(30);md(30);", add_special_tokens=False).ids
    assert ");md(" in [tokenizer.decode([i]) for i in ids]
    segmenter = Segmenter(IncrementalDetokenizer(tokenizer), StatementParser(), 64)
    cuts = [c for c in (segmenter.push(i) for i in ids) if c is not None]
    assert [c.text for c in cuts] == ["mu(30);", "md(30);"]
    assert [c.statements[0].text for c in cuts] == ["mu(30);", "md(30);"]
    assert [t for c in cuts for t in c.token_ids] == ids


def test_no_statement_within_the_token_limit_is_an_error() -> None:
    with pytest.raises(SegmentationError, match="no complete statement within 4 tokens"):
        segment("say('a very long sentence without an end", max_segment_tokens=4)


def test_invalid_text_is_an_error_naming_it() -> None:
    with pytest.raises(SegmentationError, match="invalid plan text"):
        segment("mf(50); 42 is not a skill;")


def test_plan_ending_mid_statement_is_an_error() -> None:
    with pytest.raises(SegmentationError, match="ends in the middle of a statement"):
        segment("mf(50); tl(9")


def test_chat_mode_cuts_sentences_and_paragraphs() -> None:
    reply = "Hello there. I am 3.5 years old! Are you sure?\n\nNew paragraph here"
    cuts, _, _ = segment(reply, parser=SentenceParser())
    assert "".join(c.text for c in cuts) == reply
    assert [c.statements[0].text.strip() for c in cuts] == [
        "Hello there.",
        "I am 3.5 years old!",
        "Are you sure?",
        "New paragraph here",
    ]


def test_chat_execution_is_reading_time_at_300_words_per_minute() -> None:
    language = ChatLanguage()
    parser = language.new_parser()
    sentences = parser.feed("one two three four five. ") + parser.close()
    assert language.estimate_execution_s(sentences) == (1.0, 1.0)
    assert reading_time_s("word " * 300) == 60.0
