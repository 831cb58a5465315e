"""Plan candidates (`CandidateEngine`) over the torch engine and the shipped planner:
the kept plan is the candidate with the best log-probability plus coverage reward,
recomputed here by decoding each candidate alone; nothing is handed out before all
have ended, then one token a step; without candidates it is the engine itself;
abort frees every candidate's KV; a chosen plan suspends and resumes with no KV and
refuses a rewrite; an engine without log-probabilities is refused by name."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from robot_models.language import load_language
from timely_core.clock import VirtualClock
from timely_core.engine.plan_candidates import CandidateEngine, candidate_seed
from timely_core.engine.protocol import EngineError, HandlingStrategy, SamplingParams
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.language.grammar import with_copy_bias
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

PLANNER = Path(__file__).resolve().parents[3] / "robot_models" / "checkpoints" / "planner"
SCENE = "visible: bookshelf, armchair"
INSTRUCTION = "i lost my blue umbrella somewhere in here, could you look around?"
WORDS = ("blue", "umbrella")
WEIGHT = 6.0

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(PLANNER / "tokenizer.json"))


@pytest.fixture(scope="module")
def prompt(tokenizer: Tokenizer) -> list[int]:
    language = load_language("drone")
    text = language.prompt_prefix() + language.format_request(SCENE, INSTRUCTION)
    return list(tokenizer.encode(text, add_special_tokens=False).ids)


def _params(candidates: int) -> SamplingParams:
    language = load_language("drone")
    params = SamplingParams(max_tokens=96, grammar=language.grammar())
    params = with_copy_bias(params, language, SCENE, INSTRUCTION, 10.0)
    return dataclasses.replace(params, candidates=candidates, coverage_words=WORDS)


def _engine(tokenizer: Tokenizer) -> CandidateEngine:
    inner = TorchEngine(PLANNER, EngineConfig(num_threads=1))
    return CandidateEngine(inner, tokenizer.decode, temperature=1.0, coverage_weight=WEIGHT)


def _alone(prompt: list[int], params: SamplingParams) -> tuple[list[int], float]:
    """One candidate decoded on its own engine: its ids and summed log-probability."""
    engine = TorchEngine(PLANNER, EngineConfig(num_threads=1))
    engine.add(0, prompt, dataclasses.replace(params, candidates=0, logprobs=True))
    ids: list[int] = []
    total = 0.0
    while True:
        (out,) = engine.step([0])
        ids.append(out.token_id)
        assert out.logprob is not None
        total += out.logprob
        if out.finished:
            return ids, total


def _drain(engine: CandidateEngine, gen_id: int) -> list[int]:
    """Step `gen_id` alone until it finishes; the ids handed out."""
    ids: list[int] = []
    while True:
        for out in engine.step([gen_id]):
            ids.append(out.token_id)
            if out.finished:
                return ids


def test_the_kept_plan_is_the_best_scoring_candidate(
    tokenizer: Tokenizer, prompt: list[int]
) -> None:
    engine = _engine(tokenizer)
    params = _params(candidates=4)
    engine.add(7, prompt, params)
    steps, handed, first_step = 0, [], None
    while True:
        outputs = engine.step([7])
        steps += 1
        if outputs:
            first_step = first_step or steps
            (out,) = outputs
            handed.append(out.token_id)
            if out.finished:
                break
    scored = []
    for k in range(-1, 4):
        sampled = params
        if k >= 0:
            seed = candidate_seed(None, prompt, k)
            sampled = dataclasses.replace(params, temperature=1.0, seed=seed)
        ids, logprob = _alone(prompt, sampled)
        text = tokenizer.decode(ids[:-1])
        words = {w for name in text.split("'")[1::2] for w in name.lower().split()}
        scored.append((logprob + WEIGHT * len(words & set(WORDS)), ids))
    best = max(scored, key=lambda s: s[0])
    assert handed == best[1]
    # nothing before the longest candidate ended (after its prompt's prefill), then
    # one token a step
    assert first_step >= max(len(ids) for _, ids in scored)
    assert steps == first_step + len(handed) - 1
    (choice,) = engine.choices
    assert (choice.candidates, choice.acceptable, choice.redecoded) == (5, 5, False)
    assert engine.inner.memory().device_blocks_free == _free_when_idle(engine)


def _free_when_idle(engine: CandidateEngine) -> int:
    memory = engine.inner.memory()
    return memory.device_blocks_total - memory.pinned_prefix_blocks


def test_with_no_acceptable_candidate_it_is_decoded_again_on_its_own(
    tokenizer: Tokenizer, prompt: list[int]
) -> None:
    engine = _engine(tokenizer)
    engine.accept = lambda gen_id, ids: False  # e.g. a statement past the segment limit
    params = _params(candidates=2)
    engine.add(2, prompt, params)
    assert _drain(engine, 2) == _alone(prompt, params)[0]
    (choice,) = engine.choices
    assert (choice.acceptable, choice.chosen_own, choice.redecoded) == (0, True, True)


def test_an_unacceptable_plan_is_not_kept(tokenizer: Tokenizer, prompt: list[int]) -> None:
    engine = _engine(tokenizer)
    params = _params(candidates=3)
    own = _alone(prompt, params)[0][:-1]
    engine.accept = lambda gen_id, ids: ids != own
    engine.add(4, prompt, params)
    assert _drain(engine, 4)[:-1] != own
    (choice,) = engine.choices
    assert not choice.chosen_own and not choice.redecoded


def test_without_candidates_it_is_the_engine_itself(
    tokenizer: Tokenizer, prompt: list[int]
) -> None:
    engine = _engine(tokenizer)
    params = _params(candidates=0)
    engine.add(1, prompt, params)
    assert _drain(engine, 1) == _alone(prompt, params)[0]
    assert not engine.choices and not engine.counts


def test_abort_while_deciding_frees_every_candidate(
    tokenizer: Tokenizer, prompt: list[int]
) -> None:
    engine = _engine(tokenizer)
    engine.add(3, prompt, _params(candidates=3))
    engine.step([3])
    assert engine.inner.memory().device_blocks_free < _free_when_idle(engine)
    engine.abort(3)
    assert engine.inner.memory().device_blocks_free == _free_when_idle(engine)
    assert engine.step([]) == []


def test_a_chosen_plan_waits_without_kv_and_refuses_a_rewrite(
    tokenizer: Tokenizer, prompt: list[int]
) -> None:
    engine = _engine(tokenizer)
    engine.add(5, prompt, _params(candidates=2))
    while not (outputs := engine.step([5])):
        pass
    handed = [outputs[0].token_id]
    engine.suspend(5, HandlingStrategy.PRESERVE)
    assert engine.inner.memory().device_blocks_free == _free_when_idle(engine)
    with pytest.raises(EngineError, match="suspended"):
        engine.step([5])
    assert engine.token_ids(5) == prompt + handed
    with pytest.raises(EngineError, match="admit it again"):
        engine.rewrite(5, 1, [])
    engine.resume(5)
    (out,) = engine.step([5])
    assert engine.token_ids(5) == prompt + handed + [out.token_id]


def test_an_engine_without_log_probabilities_is_refused(tokenizer: Tokenizer) -> None:
    config = SimulatedEngineConfig(eos_token_id=0, block_size=16, device_blocks=64, host_blocks=0)
    sim = SimulatedEngine(VirtualClock(), LatencyModel(), lambda p: [3, 2, 1], config)
    with pytest.raises(EngineError, match=r"log-probabilities.*SimulatedEngine"):
        CandidateEngine(sim, tokenizer.decode)
    with pytest.raises(ValueError, match=r"plan_candidates=2: .*log-probabilities"):
        PlanningService(sim, tokenizer, config=ServiceConfig(plan_candidates=2))


def test_generations_whose_candidates_outnumber_the_batch_all_decide(
    tokenizer: Tokenizer, prompt: list[int]
) -> None:
    inner = TorchEngine(PLANNER, EngineConfig(num_threads=1, max_generations=3))
    engine = CandidateEngine(inner, tokenizer.decode, temperature=1.0, coverage_weight=WEIGHT)
    params = _params(candidates=2)  # three sequences each, six for a batch of three
    engine.add(0, prompt, params)
    engine.add(1, prompt, dataclasses.replace(params, seed=11))
    handed: dict[int, list[int]] = {0: [], 1: []}
    live = [0, 1]
    while live:
        for out in engine.step(live):
            handed[out.gen_id].append(out.token_id)
            if out.finished:
                live.remove(out.gen_id)
    assert engine.counts["plans"] == 2
    alone = _engine(tokenizer)
    alone.add(0, prompt, params)
    assert handed[0] == _drain(alone, 0)  # the same plan as with the batch to itself
