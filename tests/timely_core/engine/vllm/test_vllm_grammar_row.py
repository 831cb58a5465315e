"""A grammar processor row on its own (grammar_row.py; the planner's tokenizer, the
arm's grammar, a golden plan's ids, no vLLM): a token taken ahead and then
reported is not taken twice; when another token comes, or none yet, or the grammar
refuses the argmax, the matcher stands exactly where one fed only the reported ids
stands (same mask), and the row checks before it takes from then on; a partial
prefill's argmax (no output ids yet) is never taken."""

from __future__ import annotations

import json
from functools import cache

import torch
from tokenizers import Tokenizer
from vllm_testkit import PLANNER

from robot_models.dataset import LRTRACE_TASKS
from robot_models.language import load_language
from timely_core.engine.torch.grammar import GrammarCompiler, GrammarMatcher
from timely_core.engine.vllm.grammar_args import GrammarArgs
from timely_core.engine.vllm.grammar_checks import checkpoint_eos_ids, shared_compiler
from timely_core.engine.vllm.grammar_row import NONE, GrammarRow, RowStats


@cache
def compiler() -> GrammarCompiler:
    vocab_size = json.loads((PLANNER / "config.json").read_text())["vocab_size"]
    return shared_compiler(PLANNER, int(vocab_size))


@cache
def grammar() -> str:
    return load_language("arm").grammar()


@cache
def plan_ids() -> tuple[int, ...]:
    """The longest arm golden plan's ids, which the arm grammar accepts."""
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    golden = max((t.golden_plan for t in LRTRACE_TASKS if t.robot_type == "arm"), key=len)
    ids = tuple(tokenizer.encode(golden, add_special_tokens=False).ids)
    assert compiler().rebuilt(grammar(), ids) is not None  # raises if refused
    return ids


EOS = checkpoint_eos_ids(PLANNER)[0]


def new_row(plan: list[int], outputs: list[int], stats: RowStats) -> GrammarRow:
    args = GrammarArgs(grammar=grammar(), plan_start=1, max_tokens=512)
    return GrammarRow(compiler(), args, plan, outputs, 0.0, True, stats)


def mask_of(matcher: GrammarMatcher) -> torch.Tensor:
    bitmask = torch.zeros((1, (compiler().vocab_size + 31) // 32), dtype=torch.int32)
    matcher.fill(bitmask, 0)
    return bitmask[0]


def reference(ids: list[int]) -> torch.Tensor:
    """The mask after a fresh matcher took `ids`."""
    return mask_of(compiler().rebuilt(grammar(), ids))


def allowed_other_than(ids: list[int], token: int) -> int:
    """A token the grammar allows after `ids`, other than `token`."""
    matcher = compiler().rebuilt(grammar(), ids)
    others = (t for t in range(compiler().vocab_size) if t not in (token, EOS))
    return next(t for t in others if matcher.allows(t))


def test_a_token_taken_ahead_then_reported_is_not_taken_twice() -> None:
    ids = list(plan_ids())
    stats = RowStats()
    outputs: list[int] = []
    row = new_row([], outputs, stats)
    assert row.allows_argmax(ids[0]) and row.ahead == NONE  # a prefill's argmax: checked only
    for i, token in enumerate(ids):
        outputs.append(token)
        row.advance(EOS)
        assert row.consumed == i + 1 and row.ahead == NONE
        assert torch.equal(mask_of(row.matcher), reference(ids[: i + 1]))
        if i + 1 < len(ids):
            assert row.allows_argmax(ids[i + 1]) and row.ahead == ids[i + 1]
    assert stats.rebuilt == 0 and row.takes_ahead


def test_another_token_after_a_take_ahead_leaves_the_reported_state() -> None:
    ids = list(plan_ids())
    stats = RowStats()
    outputs = ids[:3]
    row = new_row([], outputs, stats)
    row.advance(EOS)
    assert row.allows_argmax(ids[3]) and row.ahead == ids[3]
    other = allowed_other_than(ids[:3], ids[3])
    outputs.append(other)  # a processor after ours moved the argmax
    row.advance(EOS)
    assert torch.equal(mask_of(row.matcher), reference([*ids[:3], other]))
    assert stats.rebuilt == 1 and not row.takes_ahead
    follower = allowed_other_than([*ids[:3], other], -1)
    assert row.allows_argmax(follower) and row.ahead == NONE  # checks, takes nothing
    assert torch.equal(mask_of(row.matcher), reference([*ids[:3], other]))


def test_no_token_after_a_take_ahead_leaves_the_state_before_it() -> None:
    ids = list(plan_ids())
    for pending in ([], [-1]):  # nothing reported, or a placeholder not yet filled
        stats = RowStats()
        outputs = ids[2:7]
        row = new_row(ids[:2], outputs, stats)  # two plan ids in the prompt
        row.advance(EOS)
        assert row.allows_argmax(ids[7]) and row.ahead == ids[7]
        outputs.extend(pending)
        row.advance(EOS)
        assert row.consumed == 5 and row.ahead == NONE
        assert torch.equal(mask_of(row.matcher), reference(ids[:7]))
        assert stats.rebuilt == 1


def test_a_refused_argmax_leaves_the_state_as_it_was() -> None:
    ids = list(plan_ids())
    stats = RowStats()
    outputs = ids[:4]
    row = new_row([], outputs, stats)
    row.advance(EOS)
    matcher = compiler().rebuilt(grammar(), ids[:4])
    refused = next(t for t in range(compiler().vocab_size) if t != EOS and not matcher.allows(t))
    assert not row.allows_argmax(refused)
    assert not row.matcher.failed
    assert torch.equal(mask_of(row.matcher), reference(ids[:4]))
    assert stats.rebuilt == 1 and not row.takes_ahead
    outputs.append(ids[4])
    row.advance(EOS)
    assert torch.equal(mask_of(row.matcher), reference(ids[:5]))
