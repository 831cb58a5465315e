"""The grammar sampler on its own (the planner's tokenizer, logits made up): a
sampled row that tries its unmasked draw first still samples the masked
distribution; rows without a grammar are left alone in a mixed batch, wherever
the grammar rows sit; a matcher in error ends the plan with EOS; a matcher rebuilt
from a generation's kept ids stands where its own did."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from timely_core.engine.protocol import EngineError, SamplingParams
from timely_core.engine.torch.grammar import GrammarCompiler, GrammarMatcher
from timely_core.engine.torch.grammar_mask import GrammarMasker

PLANNER = Path(__file__).resolve().parents[4] / "robot_models" / "checkpoints" / "planner"
GRAMMAR = '%llguidance {}\nstart: "mu(" | "mf(" | "tc(" | "tu(" | "->True;"\n'
EOS = 0


@cache
def compiler() -> GrammarCompiler:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    return GrammarCompiler(tokenizer, tokenizer.get_vocab_size(), (EOS,))


def allowed_ids() -> torch.Tensor:
    vocab = compiler().vocab_size
    masker = GrammarMasker(1, vocab, EOS, unmasked_first=False)
    logits = torch.zeros(1, vocab)
    masker.mask_rows(logits, [0], [compiler().matcher(GRAMMAR)])
    return torch.isfinite(logits[0])


def draws(
    unmasked_first: bool, logits: torch.Tensor, count: int
) -> tuple[torch.Tensor, GrammarMasker]:
    """Frequencies of `count` seeded draws from one row, each from a fresh matcher."""
    masker = GrammarMasker(1, compiler().vocab_size, EOS, unmasked_first=unmasked_first)
    params = SamplingParams(temperature=1.0, seed=7)
    generator = torch.Generator().manual_seed(7)
    counts = torch.zeros(compiler().vocab_size)
    for _ in range(count):
        token = masker.sample(logits.clone(), [params], [generator], [compiler().matcher(GRAMMAR)])
        counts[token[0]] += 1
    return counts / count, masker


def test_an_unmasked_draw_kept_when_allowed_still_samples_the_masked_distribution() -> None:
    allowed = allowed_ids()
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(1, compiler().vocab_size, generator=generator)
    probs = torch.softmax(logits[0], dim=0)
    logits[0, allowed] += torch.log(probs[~allowed].sum() / probs[allowed].sum())  # p(A) = 1/2
    exact = torch.softmax(logits[0].masked_fill(~allowed, -torch.inf), dim=0)
    shortcut, fast = draws(True, logits, 3000)
    full, slow = draws(False, logits, 3000)
    assert fast.shortcut_rows > 1000 and fast.masked_rows > 1000  # both ways taken
    assert slow.shortcut_rows == 0
    for empirical in (shortcut, full):
        assert float(empirical[~allowed].sum()) == 0.0
        assert 0.5 * float((empirical - exact).abs().sum()) < 0.06  # total variation


def test_rows_without_a_grammar_are_left_alone_wherever_the_grammar_rows_sit() -> None:
    allowed = allowed_ids()
    vocab = compiler().vocab_size
    forbidden = int((~allowed).nonzero()[5])
    logits = torch.zeros(3, vocab)
    logits[:, forbidden] = 10.0  # every row's argmax is outside the grammar
    grammars: list[GrammarMatcher | None] = [compiler().matcher(GRAMMAR), None]
    grammars.append(compiler().matcher(GRAMMAR))
    masker = GrammarMasker(3, vocab, EOS, unmasked_first=True)
    tokens = masker.sample(logits, [SamplingParams()] * 3, [None] * 3, grammars)
    assert tokens[1] == forbidden
    assert bool(allowed[tokens[0]]) and bool(allowed[tokens[2]])
    assert masker.masked_rows == 2 and masker.shortcut_rows == 0


def test_a_matcher_in_error_ends_the_plan_with_eos() -> None:
    matcher = compiler().matcher(GRAMMAR)
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    assert not matcher.accept(tokenizer.encode("ld").ids[0])  # now in error
    masker = GrammarMasker(4, compiler().vocab_size, EOS, unmasked_first=True)
    logits = torch.randn(1, compiler().vocab_size)
    logits[0, EOS] = -1e9  # the model would never pick EOS itself
    assert masker.sample(logits, [SamplingParams()], [None], [matcher]) == [EOS]
    assert masker.dead_ends == 1


def test_a_matcher_rebuilt_from_kept_ids_stands_where_the_original_does() -> None:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    kept = tokenizer.encode("mu(", add_special_tokens=False).ids
    original = compiler().matcher(GRAMMAR)
    for token in kept:
        assert original.accept(token)
    rebuilt = compiler().rebuilt(GRAMMAR, kept)
    bitmask = torch.zeros((2, (compiler().vocab_size + 31) // 32), dtype=torch.int32)
    original.fill(bitmask, 0)
    rebuilt.fill(bitmask, 1)
    assert torch.equal(bitmask[0], bitmask[1])
    assert not torch.equal(bitmask[0], torch.zeros_like(bitmask[0]))
    with pytest.raises(EngineError, match="refuses kept token"):
        compiler().rebuilt(GRAMMAR, tokenizer.encode("ld(", add_special_tokens=False).ids)


# inside a block that must hold a statement: another condition, or a call
BLOCK = '%llguidance {}\nstart: "?sw(\'a\'){" body "}"\nbody: "?iv(\'b\'){tp();}" | "tp();"\n'


def in_the_block() -> tuple[GrammarMatcher, Tokenizer]:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    matcher = compiler().matcher(BLOCK)
    for token in tokenizer.encode("?sw('a'){", add_special_tokens=False).ids:
        assert matcher.accept(token)
    return matcher, tokenizer


def test_a_row_that_must_end_now_opens_no_new_condition() -> None:
    """In a closing window's hard half the banned ids (here every id spelling `?`)
    are refused while anything else is allowed; in its soft half the model's own
    choice, a new condition, stands."""
    _, tokenizer = in_the_block()
    vocab = compiler().vocab_size
    banned = tuple(i for i in range(vocab) if "?" in tokenizer.decode([i]))
    [block_end] = tokenizer.encode("}", add_special_tokens=False).ids
    [semicolon] = tokenizer.encode(";", add_special_tokens=False).ids
    params = SamplingParams(closing_ids=(block_end,), closing_banned_ids=banned)
    logits = torch.zeros(1, vocab)
    logits[0, list(banned)] = 10.0  # the model wants another condition
    chosen = {}
    for half, closers in (("soft", (block_end,)), ("hard", (block_end, semicolon))):
        matcher, _ = in_the_block()
        masker = GrammarMasker(1, vocab, EOS, unmasked_first=False)
        [token] = masker.sample(logits.clone(), [params], [None], [matcher], [closers])
        chosen[half] = tokenizer.decode([token])
    assert "?" in chosen["soft"] and "?" not in chosen["hard"], chosen
    assert "tp();".startswith(chosen["hard"]), chosen


def test_a_ban_that_would_leave_nothing_allowed_is_lifted() -> None:
    logits = torch.full((1, 6), -torch.inf)
    logits[0, 2] = 1.0
    GrammarMasker.ban(logits, 0, (2, 4))  # 2 is all the grammar allows
    assert logits[0, 2] == 1.0
    logits[0, 3] = 0.5
    GrammarMasker.ban(logits, 0, (2,))
    assert logits[0, 2] == -torch.inf and logits[0, 3] == 0.5
