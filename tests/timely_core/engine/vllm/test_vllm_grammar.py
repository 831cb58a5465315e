"""Plan grammars on vLLM in process (grammar_processor.py), on the shipped planner
and the robots' own grammars, against the torch engine under the same grammar:
greedy plans token-identical, in one batch with unconstrained generations that the
processor leaves alone; the same when every token comes from a new vLLM request
(resume after each token, tokens straddling a statement boundary included); a
rollback and an observation continue from the same grammar state as on torch;
closing (the token window and `set_closing`) takes the same tokens; sampled plans
under the grammar always parse; bad grammars and refused observations are named;
the service on vLLM, grammar on (its default), plans the golden plans segment by
segment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_testkit import closed_from_an_open_name
from vllm_grammar_testkit import (
    ADVERSARIAL,
    LRTRACE,
    OBSERVING,
    Case,
    Robots,
    observation_edits,
    resume_after_every_token,
    run_with_edits,
    straddling,
)
from vllm_testkit import plan_with_service

from robot_models.plan_check import check_plan
from timely_core.engine.protocol import EngineError, HandlingStrategy, SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.language.grammar import with_copy_bias

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def robots() -> Robots:
    return Robots()


@pytest.fixture(scope="module")
def torch_engine(planner: Path) -> Iterator[TorchEngine]:
    yield TorchEngine(planner, EngineConfig(num_threads=1))


def _params(robots: Robots, cases: list[Case], **overrides: Any) -> list[SamplingParams]:
    return [robots.params(c[0], **overrides) for c in cases]


def test_greedy_plans_equal_the_torch_engine_beside_unconstrained_ones(
    robots: Robots, vllm_engine: Any, torch_engine: TorchEngine
) -> None:
    cases = LRTRACE[:5] + LRTRACE[8:] + ADVERSARIAL  # 16: both in one step of 32
    constrained = _params(robots, cases)
    free = _params(robots, cases, grammar=False)
    processor = vllm_engine.grammar_processor()
    shortcuts, masks = processor.shortcut_rows, processor.masked_rows
    rebuilt = processor.row_stats.rebuilt
    # one vLLM batch: each case with and without the grammar
    got = robots.run(vllm_engine, cases + cases, constrained + free)
    expected = robots.run(torch_engine, cases + cases, constrained + free)
    assert got == expected
    # most greedy rows kept their allowed argmax unmasked; refused ones were masked
    assert processor.shortcut_rows - shortcuts > processor.masked_rows - masks > 0
    # an argmax taken ahead and refused rebuilt its row's matcher (grammar_row.py)
    assert processor.row_stats.rebuilt > rebuilt
    eos = vllm_engine.eos_token_id
    broken = 0
    for case, masked, plain in zip(cases, got[: len(cases)], got[len(cases) :], strict=True):
        text, ended = robots.text(masked, eos)
        check = check_plan(case[0], text, ended)
        assert check.valid and check.right_skills, (case, text, check.error)
        broken += not check_plan(case[0], *robots.text(plain, eos)).valid
    assert broken >= 2  # what the grammar is for: these plans were broken without it


def test_a_plan_resumed_after_every_token_keeps_its_grammar_state(
    robots: Robots, vllm_engine: Any, torch_engine: TorchEngine
) -> None:
    cases = LRTRACE[1:2] + LRTRACE[8:9] + ADVERSARIAL[:2] + ADVERSARIAL[4:5]
    params = _params(robots, cases)
    expected = robots.run(torch_engine, cases, params)
    between = resume_after_every_token([HandlingStrategy.PRESERVE, HandlingStrategy.DISCARD])
    got = robots.run(vllm_engine, cases, params, between)
    assert got == expected
    # each token was sampled by a new vLLM request; some ended one statement and
    # began the next, so the next request's grammar began inside a statement
    spelled = vllm_engine.grammars.compiler.vocab.tokens
    crossing = [t for ids in got for t in straddling(ids, spelled)]
    assert crossing, [robots.text(ids, vllm_engine.eos_token_id) for ids in got]


# requests naming objects the planner never saw, a held object to place elsewhere, or
# numbers in other units: the copy bias changes their names and numbers
COPYING: list[Case] = [
    ("drone", "visible: table, chairs", "look for my green thermos"),
    ("drone", "visible: kitchen table", "find the salt shaker"),
    ("arm", "on table: stapler, notebook", "put the stapler in the holder"),
    ("arm", "on table: red mug; places: tray", "is there a red mug on the table"),
    ("arm", "on table: trowel, crate", "put the trowel in the crate"),
    ("drone", "", "go up 1.2 m please"),
    ("arm", "", "move the gripper to x 55 cm, y -10 cm, z 35 cm"),
]


def test_the_copy_bias_takes_the_tokens_the_torch_engine_takes(
    robots: Robots, vllm_engine: Any, torch_engine: TorchEngine
) -> None:
    copying = [
        with_copy_bias(robots.params(c[0]), robots.languages[c[0]], c[1], c[2], 10.0)
        for c in COPYING
    ]
    assert all(p.copy_values for p in copying[-2:])
    plain = _params(robots, COPYING)
    got = robots.run(vllm_engine, COPYING + COPYING, copying + plain)
    assert got == robots.run(torch_engine, COPYING + COPYING, copying + plain)
    assert got[: len(COPYING)] != got[len(COPYING) :]  # the bias changed plans
    n = len(COPYING)
    assert got[n - 2 : n] != got[2 * n - 2 :]  # numbers too
    # the trowel is not placed on itself (the names that must differ travel too)
    assert "pl('crate')" in robots.tokenizer.decode(got[4]), robots.tokenizer.decode(got[4])
    # each token from a new vLLM request: the name so far comes from the prompt's plan
    between = resume_after_every_token([HandlingStrategy.DISCARD])
    assert robots.run(vllm_engine, COPYING, copying, between) == got[: len(COPYING)]


def test_rollback_and_observation_continue_from_the_same_grammar_state(
    robots: Robots, vllm_engine: Any, torch_engine: TorchEngine
) -> None:
    case = LRTRACE[1]  # "Check for keys or wallets": a conditional plan
    # "?sw('keys')==True{tp();->...": after 9 tokens, roll back into the condition
    # (4 tokens kept); once 7 are back (the block opened), append a statement
    edits = [(9, 4, []), (7, 7, robots.encode("tp();"))]
    expected = run_with_edits(torch_engine, robots, case, 500, edits)
    got = run_with_edits(vllm_engine, robots, case, 500, edits)
    assert got == expected


def test_an_observation_is_not_read_by_the_grammar_as_on_torch(
    robots: Robots, vllm_engine: Any, torch_engine: TorchEngine
) -> None:
    """A tool's answer, then a robot's failure, appended between statements: the
    grammar reads the plan text around them, never them, on vLLM as on torch
    (`observation_edits`). Marked as plan text, the same answer is refused."""
    edits, observed = observation_edits(robots)
    expected = run_with_edits(torch_engine, robots, OBSERVING, 520, edits)
    got = run_with_edits(vllm_engine, robots, OBSERVING, 520, edits)
    assert got == expected
    robots.assert_observed_plan_valid(got, observed, vllm_engine.eos_token_id)
    vllm_engine.add(530, robots.prompt(OBSERVING), robots.params("arm"))
    vllm_engine.step([530])
    vllm_engine.suspend(530, HandlingStrategy.PRESERVE)
    with pytest.raises(EngineError, match=r"generation 530: the grammar refuses"):
        vllm_engine.rewrite(530, 0, edits[0][2])
    vllm_engine.abort(530)


def test_an_observation_the_grammar_refuses_is_named_and_changes_nothing(
    robots: Robots, vllm_engine: Any, torch_engine: TorchEngine
) -> None:
    case = ADVERSARIAL[2]
    vllm_engine.add(510, robots.prompt(case), robots.params("drone"))
    while len(vllm_engine.token_ids(510)) < len(robots.prompt(case)) + 3:
        vllm_engine.step([510])
    vllm_engine.suspend(510, HandlingStrategy.PRESERVE)
    before = vllm_engine.token_ids(510)
    with pytest.raises(EngineError, match=r"generation 510: the grammar refuses"):
        vllm_engine.rewrite(510, 3, robots.encode("}}}}"))
    assert vllm_engine.token_ids(510) == before
    vllm_engine.resume(510)
    while not any(o.finished for o in vllm_engine.step([510])):
        pass
    expected = robots.run(torch_engine, [case], [robots.params("drone")])[0]
    assert before[len(robots.prompt(case)) :] == expected[:3]


def test_closing_takes_the_tokens_the_torch_engine_takes(
    robots: Robots, vllm_engine: Any, torch_engine: TorchEngine
) -> None:
    cases = LRTRACE + ADVERSARIAL
    window = _params(
        robots, cases, max_tokens=64, close_within=32, closing_ids=robots.closing_ids()
    )
    got = robots.run(vllm_engine, cases, window)
    assert got == robots.run(torch_engine, cases, window)
    cut = robots.run(vllm_engine, cases, _params(robots, cases, max_tokens=64))
    assert sum(not robots.text(ids, vllm_engine.eos_token_id)[1] for ids in cut) >= 3
    for case, ids in zip(cases, got, strict=True):
        assert robots.assert_valid(case, ids, vllm_engine.eos_token_id), case

    def ask_to_close(engine: Any, live: list[int], step: int) -> None:
        if step == 6:
            for gen_id in live:
                engine.set_closing(gen_id, True)

    asked = _params(robots, cases, closing_ids=robots.closing_ids())
    got = robots.run(vllm_engine, cases, asked, ask_to_close)
    assert got == robots.run(torch_engine, cases, asked, ask_to_close)
    assert max(len(ids) for ids in got) < 40  # they closed soon after being asked


def test_a_name_still_open_when_asked_to_close_ends_as_on_the_torch_engine(
    robots: Robots, vllm_engine: Any, torch_engine: TorchEngine
) -> None:
    """The closing window's hard half (closing.py) on vLLM: the request asked to
    close is re-submitted, its args carry where the window started, and it ends the
    name the planner keeps repeating at the same tokens as the torch engine."""
    case: Case = (
        "arm",
        "on table: m3 screw, m5 screw; bins: m3 bin, m5 bin",
        "sort the m3 screw and m5 screw into their bins",
    )
    statement = robots.encode("pk('sastooooooooo")
    # (close_within, the tokens left when asked): a window cut to one token left is
    # all hard, as a one-token window; the cut travels in the re-submitted args
    windows = [(1, None), (2, None), (6, None), (32, 1), (32, 6)]
    for gen_id, (within, left) in enumerate(windows, start=530):
        params = robots.params(
            "arm",
            close_within=within,
            closing_ids=robots.closing_ids(),
            hard_closing_ids=robots.hard_closing_ids(),
            closing_banned_ids=robots.closing_banned_ids(),
        )
        prompt = robots.prompt(case)
        got = closed_from_an_open_name(vllm_engine, gen_id, prompt, params, statement, left)
        expected = closed_from_an_open_name(torch_engine, gen_id, prompt, params, statement, left)
        assert got == expected
        if 1 in (within, left):
            assert got == [*robots.encode("');"), vllm_engine.eos_token_id]
        assert robots.assert_valid(case, statement + got, vllm_engine.eos_token_id)


@pytest.mark.parametrize("temperature", [1.0, 1.6])
def test_sampled_plans_under_the_grammar_always_parse(
    robots: Robots, vllm_engine: Any, temperature: float
) -> None:
    cases = (ADVERSARIAL + LRTRACE[:4]) * 2
    params = [robots.params(c[0], temperature=temperature, seed=i) for i, c in enumerate(cases)]
    got = robots.run(vllm_engine, cases, params)
    ended = sum(
        robots.assert_valid(c, ids, vllm_engine.eos_token_id)
        for c, ids in zip(cases, got, strict=True)
    )
    assert ended >= len(cases) // 2
    closing = [
        robots.params(
            c[0],
            temperature=temperature,
            seed=100 + i,
            close_within=48,
            closing_ids=robots.closing_ids(),
        )
        for i, c in enumerate(cases)
    ]
    for case, ids in zip(cases, robots.run(vllm_engine, cases, closing), strict=True):
        assert robots.assert_valid(case, ids, vllm_engine.eos_token_id), case  # all ended


def test_bad_grammar_requests_are_refused_naming_them(robots: Robots, vllm_engine: Any) -> None:
    prompt = robots.prompt(ADVERSARIAL[0])
    with pytest.raises(ValueError, match=r"generation 520: invalid grammar"):
        vllm_engine.add(520, prompt, SamplingParams(grammar="start: ("))
    with pytest.raises(ValueError, match=r"generation 521: closing_ids \[10000000\]"):
        vllm_engine.add(521, prompt, robots.params("drone", close_within=8, closing_ids=(10**7,)))
    for gen_id in (520, 521):
        with pytest.raises(EngineError):
            vllm_engine.generation(gen_id)


def test_the_service_on_vllm_plans_under_the_grammar(
    vllm_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    grammars: list[str | None] = []
    add = vllm_engine.add

    def recording_add(gen_id: int, prompt: list[int], params: SamplingParams, *a: Any) -> None:
        grammars.append(params.grammar)
        add(gen_id, prompt, params, *a)

    monkeypatch.setattr(vllm_engine, "add", recording_add)
    robots = 8
    failures, stats = plan_with_service(vllm_engine, robots, grammar=True)
    assert not failures, "\n".join(failures)
    assert stats.succeeded == robots
    assert stats.segments_emitted > robots  # each plan resumed as new vLLM requests
    assert len(grammars) >= robots and all(g is not None for g in grammars)


def test_a_cut_back_token_takes_the_probability_of_the_tokens_cut() -> None:
    """Closing in a sampled row: drawing, then cutting a token back to a statement's
    end, is the same distribution as drawing from the merged one at its temperature."""
    import torch

    from timely_core.engine.vllm.grammar_processor import move_probability

    temperature = 1.6
    row = torch.tensor([1.0, 2.0, 0.5, -1.0, 0.0])
    before = torch.softmax(row / temperature, dim=0)
    move_probability(row, [(1, 0), (3, 2)], temperature)
    after = torch.softmax(row / temperature, dim=0)
    expected = torch.stack(
        [
            before[0] + before[1],
            torch.tensor(0.0),
            before[2] + before[3],
            torch.tensor(0.0),
            before[4],
        ]
    )
    assert torch.allclose(after, expected, atol=1e-6)
