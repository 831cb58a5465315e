"""Incremental detokenization equals a full decode, and never emits half a character."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.timely_core.core_support import make_tokenizer
from timely_core.language.detokenizer import IncrementalDetokenizer

MULTIBYTE = "say('猫 и кот, déjà vu');"


def deltas_of(ids: list[int], context: list[int] | None = None) -> list[str]:
    detokenizer = IncrementalDetokenizer(make_tokenizer(), context or [])
    deltas = [detokenizer.push(i) for i in ids]
    deltas.append(detokenizer.flush())
    return deltas


def test_multibyte_characters_split_across_tokens_are_held_back() -> None:
    tokenizer = make_tokenizer()
    ids = tokenizer.encode(MULTIBYTE, add_special_tokens=False).ids
    pieces = [tokenizer.decode([i]) for i in ids]
    assert any("\ufffd" in p for p in pieces), "the test needs a character split across tokens"
    deltas = deltas_of(ids)
    assert "".join(deltas) == MULTIBYTE
    assert all("\ufffd" not in d for d in deltas)
    assert "" in deltas[:-1]  # some token completed no character


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="abcmf(); '\n猫éк0123456789", max_size=40))
def test_concatenated_deltas_equal_full_decode(text: str) -> None:
    tokenizer = make_tokenizer()
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    assert "".join(deltas_of(ids)) == tokenizer.decode(ids) == text


def test_prompt_context_is_not_part_of_the_output() -> None:
    tokenizer = make_tokenizer()
    prompt = tokenizer.encode("Task: look for the cat\nPlan:", add_special_tokens=False).ids
    ids = tokenizer.encode(" mf(50);", add_special_tokens=False).ids
    assert "".join(deltas_of(ids, prompt)) == " mf(50);"


def test_generated_ids_are_kept_not_retokenized() -> None:
    tokenizer = make_tokenizer()
    detokenizer = IncrementalDetokenizer(tokenizer, [1, 2, 3])
    ids = tokenizer.encode("mf(50);", add_special_tokens=False).ids
    for i in ids:
        detokenizer.push(i)
    assert detokenizer.generated_ids == ids
