"""Grammar masks with a planner tokenizer in the `spaced` word format (every space a
token of its own), loaded from its files as the torch engine loads a checkpoint's:
each token's bytes are what the detokenizer writes (the space token is b" "), a
plan with multi-word and unseen object names is accepted token by token, and the
space token is allowed inside a plan string but nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from robot_models.dataset import LRTRACE_TASKS
from robot_models.language import load_language
from robot_models.training.hf_format import EOS_TOKEN
from robot_models.training.tokenizer import save_tokenizer, train_tokenizer
from timely_core.engine.torch.grammar import GrammarCompiler
from timely_core.engine.torch.grammar_vocab import token_bytes

DRONE = load_language("drone")
SPACE = "Ġ"  # the byte-level character for " "
PLANS = [
    "?sw('blue florbin jar')==True{o('blue florbin jar');a('blue florbin jar');tp();}",
    "?sw('Zorgle-Wump XL')==True{tp();->True;}->False;",
    "mu(436);?iv('old Teapot 7')==True{tp();}",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A spaced tokenizer's files, trained on the drone prefix and the LRTrace tasks."""
    corpus = [DRONE.prompt_prefix()] * 4 + [t.golden_plan for t in LRTRACE_TASKS] * 4
    corpus += [DRONE.format_request(t.scene, t.instruction) for t in LRTRACE_TASKS] * 4
    root = tmp_path_factory.mktemp("spaced")
    save_tokenizer(train_tokenizer(corpus, vocab_size=500, words="spaced"), root)
    return root


def _loaded(saved: Path) -> tuple[Tokenizer, GrammarCompiler]:
    tokenizer = Tokenizer.from_file(str(saved / "tokenizer.json"))
    eos = _id(tokenizer, EOS_TOKEN)
    return tokenizer, GrammarCompiler.from_checkpoint(saved, tokenizer.get_vocab_size(), (eos,))


def _id(tokenizer: Tokenizer, token: str) -> int:
    token_id = tokenizer.token_to_id(token)
    assert token_id is not None, token
    return token_id


def _allowed(compiler: GrammarCompiler, matcher_ids: list[int], token_id: int) -> bool:
    matcher = compiler.rebuilt(DRONE.grammar(), matcher_ids)
    bitmask = torch.zeros((1, (compiler.vocab_size + 31) // 32), dtype=torch.int32)
    matcher.fill(bitmask, 0)
    return bool((int(bitmask[0, token_id // 32]) >> (token_id % 32)) & 1)


def test_every_token_adds_the_bytes_the_detokenizer_writes(saved: Path) -> None:
    tokenizer, compiler = _loaded(saved)
    vocab = compiler.vocab
    space = _id(tokenizer, SPACE)
    assert vocab.tokens[space] == b" " and space not in vocab.special
    for token_id, raw in enumerate(vocab.tokens):
        if token_id not in vocab.special:
            assert tokenizer.decode([token_id]) == raw.decode("utf-8", errors="replace")
    for text in [*PLANS, DRONE.prompt_prefix(), "find the  Übergrößen-Kiste, it's 50 cm away"]:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        assert b"".join(vocab.tokens[i] for i in ids) == text.encode()
    assert token_bytes(tokenizer, tokenizer.get_vocab_size()) == vocab  # as the engine reads it


@pytest.mark.parametrize("plan", PLANS)
def test_a_plan_with_spaced_names_is_accepted_token_by_token(saved: Path, plan: str) -> None:
    tokenizer, compiler = _loaded(saved)
    ids = tokenizer.encode(plan, add_special_tokens=False).ids
    assert _id(tokenizer, SPACE) in ids
    assert _allowed(compiler, ids, _id(tokenizer, EOS_TOKEN))  # accepted, can end


def test_the_space_token_is_allowed_in_a_string_only(saved: Path) -> None:
    tokenizer, compiler = _loaded(saved)
    space = _id(tokenizer, SPACE)
    inside = tokenizer.encode("?sw('blue", add_special_tokens=False).ids
    assert _allowed(compiler, inside, space)
    for outside in ("?sw('blue')==True{tp();", "mu(", "mu(436)", ""):
        assert not _allowed(
            compiler, tokenizer.encode(outside, add_special_tokens=False).ids, space
        )
