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
        "config": asdict(config),
        "steps_done": float(config.steps),
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
    write_model_card(tmp_path)
    return (tmp_path / "MODEL_CARD.md").read_text()


def test_number_token_run_card_names_its_tokenizer_tying_and_flags(tmp_path: Path) -> None:
    card = _card(tmp_path, replace(TrainConfig(), number_tokens=True, tie_embeddings=True))
    assert "`python -m robot_models.train --number-tokens --tie-embeddings`" in card
    assert "every whole number\n  from 0 to 999 is one token" in card
    assert "trained tied" in card
    assert "`<eos>` = id 0" in card


def test_default_run_card_splits_digits_and_has_no_extra_flags(tmp_path: Path) -> None:
    card = _card(tmp_path, TrainConfig())
    assert "`python -m robot_models.train`:" in card
    assert "digits are split\n  into single-digit tokens. `<eos>` = id 0" in card
    assert "tied" not in card
    assert "slips in copying a number\ndigit by digit" in card
