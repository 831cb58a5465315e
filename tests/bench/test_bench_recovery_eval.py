"""bench/recovery_eval.py: its greedy column decodes what `observation_eval` (HF)
decodes, its service column samples as the service does, and it scores as
`observation_eval` scores."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from recovery_eval import continuations, sampling, tally  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from robot_models.checkpoints import default_planner_path  # noqa: E402
from robot_models.observation_eval import first_statement, recovery_cases  # noqa: E402
from robot_models.prompts import format_request, prompt_prefix  # noqa: E402
from robot_models.reference_planner import ReferencePlanner  # noqa: E402
from timely_core.service_config import ServiceConfig  # noqa: E402

MAX_POSITIONS = 2048  # the planner's context (config.json)


def test_greedy_continuations_on_the_engine_equal_hfs() -> None:
    """Equal, or where HF wrote past the model's 2048 positions (it only warns), the
    engine's continuation is HF's up to the engine's context limit."""
    cases = recovery_cases(6)
    config = ServiceConfig()
    model = default_planner_path()
    texts = continuations(model, cases, "greedy", config)
    reference = ReferencePlanner(model)
    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    for case, text in zip(cases, texts, strict=True):
        e = case.example
        expected, _ = reference.plan(e.robot_type, e.scene, e.instruction, written=case.written)
        prompt = prompt_prefix(e.robot_type), format_request(e.scene, e.instruction)
        used = sum(len(tokenizer.encode(t).ids) for t in (*prompt, *case.written))
        room = min(config.max_tokens, MAX_POSITIONS - used)
        if len(tokenizer.encode(expected).ids) + 1 > room:  # HF's plan and its EOS
            assert expected.startswith(text) and len(text) < len(expected), case.written
        else:
            assert text == expected, case.written


def test_the_service_column_samples_with_the_grammar_and_the_copy_bias() -> None:
    case = next(c for c in recovery_cases(20) if c.example.robot_type == "arm")
    config = ServiceConfig()
    greedy, grammar, service = (sampling(m, case, config) for m in ("greedy", "grammar", "service"))
    assert greedy.grammar is None and not greedy.copy_names
    assert grammar.grammar is not None and not grammar.copy_names
    assert service.grammar == grammar.grammar
    assert service.copy_bias == config.copy_bias and service.copy_names


def test_tally_counts_exact_and_first_statements_by_kind() -> None:
    cases = recovery_cases(3)
    first = first_statement(cases[1].example.robot_type, cases[1].expected)
    assert first and first != cases[1].expected
    texts = [cases[0].expected, first + "lg('something else');", ""]
    totals = tally(cases, texts)
    assert (totals["cases"], totals["exact"], totals["first"]) == (3, 1, 2)
    assert sum(totals[f"{k}:cases"] for k in {c.kind for c in cases}) == 3
    assert sum(totals.get(f"{k}:first", 0) for k in {c.kind for c in cases}) == 2
