"""The reference planner refuses a checkpoint folder it cannot load by naming the
folder and the file it lacks (not a tokenizers traceback), before transformers
loads anything."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from robot_models.checkpoints import default_planner_path
from robot_models.reference_planner import ReferencePlanner
from robot_models.training.options import OptionError


def test_a_missing_checkpoint_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match=r"no checkpoint folder .*nonexistent"):
        ReferencePlanner(tmp_path / "nonexistent")


def test_a_checkpoint_without_its_tokenizer_is_named_with_the_file(tmp_path: Path) -> None:
    shutil.copy(default_planner_path() / "config.json", tmp_path)
    shutil.copy(default_planner_path() / "model.safetensors", tmp_path)
    missing = re.escape(f"checkpoint folder {tmp_path} has no tokenizer.json") + "$"
    with pytest.raises(OptionError, match=missing):
        ReferencePlanner(tmp_path)


def test_a_config_without_its_special_token_ids_is_refused(tmp_path: Path) -> None:
    for name in ("tokenizer.json", "model.safetensors"):
        shutil.copy(default_planner_path() / name, tmp_path)
    config = json.loads((default_planner_path() / "config.json").read_text())
    del config["pad_token_id"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(OptionError, match=r"config.json has no integer pad_token_id"):
        ReferencePlanner(tmp_path)
