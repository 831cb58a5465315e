"""The bytes a grammar matcher sees per token are exactly what the detokenizer
writes: every token of the planner's tokenizer alone, and any text token by token
(place-marked digits included); other tokenizer formats too, or a clear refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models

from robot_models.dataset import LRTRACE_TASKS
from robot_models.language import load_language
from robot_models.training.tokenizer import train_tokenizer
from timely_core.engine.torch.grammar_vocab import token_bytes

PLANNER = Path(__file__).resolve().parents[4] / "robot_models" / "checkpoints" / "planner"
TEXTS = [
    "mu(436);tc(50);dl(2.5);mt(150,-500,0);",
    "_1=ox('red cup');?_1<0.4{tu(20);}->False;",
    "A child runs at the drone 🐱 — über-schnell, ¿sí? 日本語 \t\n",
    *[t.golden_plan for t in LRTRACE_TASKS],
    *[load_language(r).prompt_prefix() for r in ("drone", "arm")],
]


def planner_tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(PLANNER / "tokenizer.json"))


def test_every_planner_token_decodes_to_its_bytes() -> None:
    tokenizer = planner_tokenizer()
    vocab = token_bytes(tokenizer, tokenizer.get_vocab_size())
    assert len(vocab.tokens) == tokenizer.get_vocab_size()
    for token_id, raw in enumerate(vocab.tokens):
        if token_id in vocab.special:
            assert tokenizer.decode([token_id]) == "", token_id
        else:
            decoded = tokenizer.decode([token_id], skip_special_tokens=False)
            assert decoded == raw.decode("utf-8", errors="replace"), token_id
    eos = tokenizer.token_to_id("<eos>")
    assert eos in vocab.special and tokenizer.token_to_id("<pad>") in vocab.special
    marks = [i for i, raw in enumerate(vocab.tokens) if raw == b"" and i != eos]
    assert marks and set(marks) <= vocab.special  # a lone place mark adds no text


@pytest.mark.parametrize("text", TEXTS)
def test_text_is_the_concatenation_of_its_tokens_bytes(text: str) -> None:
    tokenizer = planner_tokenizer()
    vocab = token_bytes(tokenizer, tokenizer.get_vocab_size())
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    assert b"".join(vocab.tokens[i] for i in ids) == text.encode()
    assert tokenizer.decode(ids) == text


def test_digits_are_their_own_bytes_whatever_their_place_mark() -> None:
    tokenizer = planner_tokenizer()
    vocab = token_bytes(tokenizer, tokenizer.get_vocab_size())
    ids = tokenizer.encode("436", add_special_tokens=False).ids
    assert [vocab.tokens[i] for i in ids] == [b"4", b"3", b"6"]
    assert len(set(ids)) == 3 and ids != tokenizer.encode("4", add_special_tokens=False).ids * 3


def test_ids_past_the_tokenizer_are_special() -> None:
    tokenizer = planner_tokenizer()
    size = tokenizer.get_vocab_size()
    vocab = token_bytes(tokenizer, size + 7)
    assert set(range(size, size + 7)) <= vocab.special


def test_whole_number_tokens_added_to_a_tokenizer_round_trip() -> None:
    tokenizer = train_tokenizer(TEXTS, vocab_size=400, numbers="whole")
    vocab = token_bytes(tokenizer, tokenizer.get_vocab_size())
    for text in TEXTS[:3]:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        assert b"".join(vocab.tokens[i] for i in ids) == text.encode()


def test_a_tokenizer_that_is_not_byte_level_is_refused() -> None:
    tokenizer = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tokenizer.decoder = decoders.WordPiece()
    with pytest.raises(ValueError, match="byte-level"):
        token_bytes(tokenizer, 2)
