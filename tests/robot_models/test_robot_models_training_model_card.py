"""The model card says how the checkpoint tokenizes numbers and how to retrain it:
a run's non-default options, booleans included, become its command line."""

import json
from dataclasses import asdict, replace
from pathlib import Path

from robot_models.training.hf_format import hf_config
from robot_models.training.loop import TrainConfig
from robot_models.training.model import LlamaShape
from robot_models.training.model_card import write_model_card


def _card(tmp_path: Path, config: TrainConfig) -> str:
    return _card_from(tmp_path, asdict(config))


def _card_from(
    tmp_path: Path, config: dict[str, object], evaluation: dict[str, object] | None = None
) -> str:
    shape = LlamaShape(
        vocab_size=2526,
        hidden_size=192,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=6,
        num_key_value_heads=2,
    )
    (tmp_path / "config.json").write_text(json.dumps(hf_config(shape, eos_id=0, pad_id=1)))
    stats = {
        "config": config,
        "steps_done": float(config["steps"]),  # type: ignore[arg-type]
        "train_seconds": 600.0,
        "final_loss": 0.05,
        "parameters": 2059584.0,
        "prefix_tokens_drone": 1811.0,
        "prefix_tokens_arm": 1397.0,
        "train_examples": 7700.0,
        "heldout_examples": 300.0,
        "load_min": 1.0,
        "load_max": 2.0,
    }
    (tmp_path / "train_stats.json").write_text(json.dumps(stats))
    write_model_card(tmp_path, evaluation)
    return (tmp_path / "MODEL_CARD.md").read_text()


def test_number_token_run_card_names_its_tokenizer_tying_and_flags(tmp_path: Path) -> None:
    card = _card(tmp_path, replace(TrainConfig(), numbers="whole", tie_embeddings=True))
    assert "`python -m robot_models.train --numbers whole --tie-embeddings`" in card
    assert "every whole number\n  from 0 to 999 is one token" in card
    assert "trained tied" in card
    assert "`<eos>` = id 0" in card


def test_default_run_card_marks_digits_by_place_and_has_no_extra_flags(tmp_path: Path) -> None:
    card = _card(tmp_path, TrainConfig())
    assert "`python -m robot_models.train`:" in card
    assert "every digit is one\n  token marked with its place" in card
    assert "tied" not in card
    assert "in batches of 32, at a peak learning rate of 0.003 (a short" in card
    assert "full prefix, in batches of 16, at a peak learning rate of 0.001" in card


def test_plain_digit_run_card_says_digits_are_split(tmp_path: Path) -> None:
    card = _card(tmp_path, replace(TrainConfig(), numbers="digits"))
    assert "`python -m robot_models.train --numbers digits`" in card
    assert "digits are split\n  into single-digit tokens. `<eos>` = id 0" in card
    assert "slip in copying a number\ndigit by digit" in card


def test_cards_of_runs_recorded_before_the_number_formats_read_their_old_flag(
    tmp_path: Path,
) -> None:
    config = asdict(TrainConfig())
    del config["numbers"]
    for old_flag, expected in ((True, "every whole number"), (False, "digits are split")):
        card = _card_from(tmp_path, {**config, "number_tokens": old_flag})
        assert expected in card


def test_evaluated_card_counts_the_invalid_plans_and_quotes_one(tmp_path: Path) -> None:
    evaluation = {
        "heldout_total": 300,
        "heldout_valid": 298,
        "heldout_exact": 190,
        "valid_rate": 298 / 300,
        "lrtrace_exact": 11,
        "lrtrace_total": 11,
        "right_skill": 311,
        "right_skill_total": 311,
        "right_skill_rate": 1.0,
        "failures": [
            {"instruction": "Clean the desk", "expected": "hm();", "got": "hm();", "error": ""},
            {"instruction": "Go right 74 cm", "expected": "mr(74);", "got": "mr(7);", "error": "x"},
        ],
    }
    card = _card_from(tmp_path, asdict(TrainConfig()), evaluation)
    assert "| valid plans, held-out | 298/300 (99.3%) | >= 99.5% |" in card
    assert '2 of 300 held-out plans were invalid, for example `mr(7);` for "Go right 74 cm"' in card


def test_evaluated_card_reports_the_natural_set_beside_the_templates(tmp_path: Path) -> None:
    tally = {"plans": 150, "valid": 60, "right_skills": 140, "grounded": 30, "sensible": 15}
    evaluation: dict[str, object] = {
        "heldout_total": 300,
        "heldout_valid": 299,
        "heldout_exact": 187,
        "valid_rate": 299 / 300,
        "lrtrace_exact": 11,
        "lrtrace_total": 11,
        "right_skill": 311,
        "right_skill_total": 311,
        "right_skill_rate": 1.0,
        "failures": [],
        "natural": {"drone": tally, "arm": {**tally, "plans": 160, "sensible": 5}},
    }
    card = _card_from(tmp_path, asdict(TrainConfig()), evaluation)
    assert "| drone | 150 | 60/150 (40.0%) | 140/150 (93.3%) | 30/150 (20.0%) |" in card
    assert "| both | 310 | 120/310 (38.7%) | 280/310 (90.3%) | 60/310 (19.4%) | 20/310" in card
    assert "natural set: 60 of 310 plans grounded, 20 sensible" in card
    assert "On the service" not in card
    served = {**tally, "exact": 0}
    natural_sides = {"service_without_grammar": served, "service_with_grammar": served}
    evaluation["natural_engine"] = {
        "natural": natural_sides,
        "heldout": {
            "service_without_grammar": {**served, "plans": 300, "exact": 187},
            "service_with_grammar": {**served, "plans": 300, "exact": 188},
        },
    }
    card = _card_from(tmp_path, asdict(TrainConfig()), evaluation)
    assert (
        "| natural | yes (default) | 150 | 60/150 (40.0%) | 140/150 (93.3%) | 30/150 (20.0%) |"
        in card
    )
    assert "| template held-out | no | 300 | 60/300 (20.0%) | 140/300 (46.7%) | - | - |" in card
    assert "| 188/300 (62.7%) |" in card
    assert "grounded names" not in card  # figures from before grounded names
    natural_sides["service_grounded_names"] = {**served, "grounded": 45}
    card = _card_from(tmp_path, asdict(TrainConfig()), evaluation)
    assert "| natural | yes, grounded names | 150 | 60/150 (40.0%) |" in card
    assert "| 45/150 (30.0%) |" in card
    assert "no copy bias" not in card  # figures from before the copy bias
    natural_sides["service_grammar_no_copy"] = {**served, "grounded": 25}
    card = _card_from(tmp_path, asdict(TrainConfig()), evaluation)
    assert "| natural | yes, no copy bias | 150 | 60/150 (40.0%) |" in card
    assert "| 25/150 (16.7%) |" in card


def test_card_without_the_natural_set_has_no_natural_section(tmp_path: Path) -> None:
    card = _card(tmp_path, TrainConfig())
    assert "Natural set" not in card
    assert "far from them. " in card
