"""Training examples of plans that react (`dataset/observations.py`), their encoding
with observations as input (`training/batches.py`), the training option and the
recovery score (`observation_eval.py`)."""

from __future__ import annotations

import ast
import random
from collections import Counter
from collections.abc import Sequence

import pytest

from robot_models.dataset import Example, build_dataset
from robot_models.dataset.observations import (
    LEVEL_MOVES,
    OBSERVATION_FORMAT,
    failure_examples,
    with_failure,
)
from robot_models.grammar import plan_grammar
from robot_models.language import FAILED_MARK, load_language
from robot_models.observation_eval import RecoveryCase, first_statement, recovery_cases, score
from robot_models.skills import SkillSet
from robot_models.training.batches import IGNORE, collate, encode_example
from robot_models.training.loop import TrainConfig, training_data
from tests.robot_models.grammar_support import text_grammar_accepts
from timely_core.tools.router import OBSERVATION_FORMAT as SERVICE_OBSERVATION_FORMAT


@pytest.fixture(scope="module")
def variants() -> list[tuple[Example, Example]]:
    data = build_dataset()
    rng = random.Random(3)
    pairs = []
    for example in [*data.train[:150], *data.train[-150:], *data.lrtrace]:
        failed = with_failure(example, rng)
        if failed is not None:
            pairs.append((example, failed))
    return pairs


def _pieces(example: Example) -> tuple[list[str], list[str]]:
    """(what the planner writes, the observations), in order (`Example.pieces`)."""
    pieces = example.pieces()
    assert "".join(text for text, _ in pieces) == example.plan
    observed = [text for text, is_observation in pieces if is_observation]
    assert observed == [example.plan[start:end] for start, end in example.observed]
    return [text for text, is_observation in pieces if not is_observation], observed


def test_an_observation_reads_as_the_service_appends_it(
    variants: list[tuple[Example, Example]],
) -> None:
    assert OBSERVATION_FORMAT == SERVICE_OBSERVATION_FORMAT
    for original, failed in variants:
        written, observed = _pieces(failed)
        language = load_language(original.robot_type)
        assert 1 <= len(observed) <= 2
        # the plan up to the failure is the original's, cut after a whole statement
        assert original.plan.startswith(written[0])
        statement = language.parse(written[0])[-1].text
        assert written[0].endswith(statement)
        error = ast.literal_eval(observed[0].split(FAILED_MARK, 1)[1][: -len(")\n")])
        assert observed[0] == OBSERVATION_FORMAT.format(
            observation=language.failure_observation(statement, error)
        )


def test_what_the_planner_writes_is_a_valid_plan(variants: list[tuple[Example, Example]]) -> None:
    grammars = {r: plan_grammar(SkillSet.load(r)) for r in ("drone", "arm")}
    for _, failed in variants:
        written, _ = _pieces(failed)
        for piece in written:  # each piece alone parses (the service segments it so)
            load_language(failed.robot_type).parse(piece)
        assert text_grammar_accepts(grammars[failed.robot_type], "".join(written)), failed.plan


def test_each_kind_of_failure_gets_its_recovery(variants: list[tuple[Example, Example]]) -> None:
    kinds: Counter[str] = Counter()
    for original, failed in variants:
        kind = failed.family.rsplit("+", 1)[-1]
        kinds[kind] += 1
        written, observed = _pieces(failed)
        statement = load_language(original.robot_type).parse(written[0])[-1].text
        rest = original.plan[len(written[0]) :]
        after = written[-1]
        if len(observed) == 2:  # failed again after its recovery: report and stop
            assert written[1].endswith(statement)
            assert after.startswith("lg('stopped: ") and "failed twice" in after
        elif kind == "stop":
            assert after.startswith("lg('stopped: robot fault');")
            assert after.endswith("hm();" if original.robot_type == "arm" else ");")
        elif kind == "retry":
            assert after == statement + rest
        elif kind == "go_over":
            assert statement[:2] in LEVEL_MOVES
            assert after == f"mu(50);{statement}md(50);{rest}"
        elif kind == "regrasp":
            assert after == f"og();{statement}{rest}" and statement.startswith("pk(")
        else:
            assert kind == "not_found" and after.endswith("hm();")
    assert {"retry", "stop", "go_over"} <= set(kinds)
    assert kinds["retry"] > kinds["stop"]


def test_observations_are_input_not_targets() -> None:
    from tokenizers import Tokenizer

    from robot_models.checkpoints import default_planner_path

    tokenizer = Tokenizer.from_file(str(default_planner_path() / "tokenizer.json"))
    plain = Example("drone", "", "go forward", "mf(100);tc(90);", "motion")
    failed = with_failure(plain, random.Random(0))
    assert failed is not None and failed.observed
    eos = 0
    encoded = encode_example(tokenizer, failed, eos)
    (start, end), *_ = encoded.masked
    observation = failed.plan[failed.observed[0][0] : failed.observed[0][1]]
    assert list(encoded.suffix_ids[start:end]) == tokenizer.encode(observation).ids
    _, targets = collate([encoded], pad_id=1)
    row = targets[0].tolist()
    assert all(t == IGNORE for t in row[start - 1 : end - 1])  # never predicted
    assert row[end - 1] == encoded.suffix_ids[end]  # the recovery's first token is
    # an example without observations encodes as before: request + plan + EOS
    again = encode_example(tokenizer, plain, eos)
    assert again.masked == () and again.suffix_ids[again.request_len :] == (
        *tokenizer.encode(plain.plan).ids,
        eos,
    )


def test_the_training_option_adds_failure_variants() -> None:
    with pytest.raises(ValueError, match="observations: must be a fraction"):
        TrainConfig(observations=1.5)
    base = training_data(TrainConfig(examples=40))
    more = training_data(TrainConfig(examples=40, observations=0.5))
    assert more.heldout == base.heldout and more.train[: len(base.train)] == base.train
    extra = more.train[len(base.train) :]
    assert extra and all(e.observed for e in extra)
    assert failure_examples([], 1.0, random.Random(0)) == []


def test_recovery_cases_and_their_score() -> None:
    cases = recovery_cases(6)
    assert len(cases) == 6
    for case in cases:
        assert "".join(case.written) + case.expected == case.example.plan
        assert case.written[-1].startswith("\n") and FAILED_MARK in case.written[-1]

    class Oracle:
        def plan(
            self, robot_type: str, scene: str, instruction: str, *, written: Sequence[str]
        ) -> tuple[str, bool]:
            expected = next(c.expected for c in cases if c.written == tuple(written))
            return expected, True

    class Lander:
        def plan(
            self, robot_type: str, scene: str, instruction: str, *, written: Sequence[str]
        ) -> tuple[str, bool]:
            return "ld();", True

    perfect = score(Oracle(), cases)["totals"]
    assert isinstance(perfect, dict) and perfect["exact"] == perfect["first"] == 6
    wrong = score(Lander(), cases)["totals"]
    assert isinstance(wrong, dict) and wrong["exact"] == 0 and wrong["cases"] == 6
    assert first_statement("drone", "mf(100);tc(90);") == "mf(100);"
    assert first_statement("drone", "not a plan") == ""
    assert isinstance(cases[0], RecoveryCase)


def test_a_drone_stops_by_landing_only_when_it_is_in_the_air() -> None:
    example = Example("drone", "", "take off, then climb", "tk();mu(100);ld();", "motion")
    endings: dict[str, set[str]] = {"tk();": set(), "mu(100);": set()}
    for seed in range(300):
        failed = with_failure(example, random.Random(seed), twice=0.0)
        assert failed is not None
        written, _ = _pieces(failed)
        statement = load_language("drone").parse(written[0])[-1].text
        if failed.family.endswith("+stop") and statement in endings:
            endings[statement].add(written[-1])
    assert endings["tk();"] == {"lg('stopped: robot fault');"}  # still on the ground
    assert endings["mu(100);"] == {"lg('stopped: robot fault');ld();"}
