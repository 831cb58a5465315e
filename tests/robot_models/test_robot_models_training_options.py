"""The checks `train` and `evaluate` run on their options before any work: each
failure names the option and says what is wrong, in the words argparse would use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from robot_models.checkpoints import default_planner_path
from robot_models.training.options import (
    OptionError,
    at_least,
    check_output_dir,
    check_output_file,
    read_checkpoint,
    read_json_file,
)


def test_an_option_error_names_its_flag_as_argparse_does() -> None:
    error = OptionError("init_from", "no checkpoint folder /x")
    assert str(error) == "init_from: no checkpoint folder /x"
    assert error.cli_message() == "argument --init-from: no checkpoint folder /x"
    assert isinstance(error, ValueError)


def test_at_least_refuses_a_smaller_value() -> None:
    at_least("steps", 1, 1)
    with pytest.raises(OptionError, match="steps: must be at least 1, got 0"):
        at_least("steps", 0, 1)


def test_an_output_folder_may_be_new_but_not_under_or_at_a_file(tmp_path: Path) -> None:
    check_output_dir(tmp_path, "out")
    check_output_dir(tmp_path / "new" / "deeper", "out")  # made with its parents
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(OptionError, match="afile exists and is not a folder"):
        check_output_dir(afile, "out")
    with pytest.raises(OptionError, match=r"cannot create .*afile is a file"):
        check_output_dir(afile / "sub" / "dir", "out")


def test_an_output_file_needs_an_existing_folder(tmp_path: Path) -> None:
    check_output_file(tmp_path / "o.json", "json")
    with pytest.raises(OptionError, match=r"no folder .*missing"):
        check_output_file(tmp_path / "missing" / "o.json", "json")
    with pytest.raises(OptionError, match="is a folder, not a file"):
        check_output_file(tmp_path, "json")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OptionError, match="afile is not a folder"):
        check_output_file(tmp_path / "afile" / "o.json", "json")


def test_an_input_json_file_must_exist_and_parse(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"card": {}}))
    assert read_json_file(good, "engine_figures") == {"card": {}}
    with pytest.raises(OptionError, match="engine_figures: no file"):
        read_json_file(tmp_path / "none.json", "engine_figures")
    with pytest.raises(OptionError, match="is not a file"):
        read_json_file(tmp_path, "engine_figures")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(OptionError, match=r"bad.json is not readable JSON"):
        read_json_file(tmp_path / "bad.json", "engine_figures")


def test_a_checkpoint_folder_is_named_with_the_files_it_lacks(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match=r"checkpoint: no checkpoint folder .*none"):
        read_checkpoint(tmp_path / "none", "checkpoint")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OptionError, match="afile is a file, not a checkpoint folder"):
        read_checkpoint(tmp_path / "afile", "checkpoint")
    shutil.copy(default_planner_path() / "config.json", tmp_path)
    with pytest.raises(OptionError, match=r"has no tokenizer.json, model.safetensors$"):
        read_checkpoint(tmp_path, "checkpoint")
    with pytest.raises(OptionError, match=r"has no tokenizer.json, model.safetensors, stats"):
        read_checkpoint(tmp_path, "init_from", also=("stats",))


def test_a_checkpoint_whose_files_do_not_parse_is_refused(tmp_path: Path) -> None:
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(default_planner_path() / name, tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"")  # the weights are not read here
    config, tokenizer = read_checkpoint(tmp_path, "checkpoint")
    assert config["eos_token_id"] == tokenizer.token_to_id("<eos>")
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(OptionError, match=r"tokenizer.json is not a tokenizer \("):
        read_checkpoint(tmp_path, "checkpoint")
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(OptionError, match=r"config.json is not a JSON object"):
        read_checkpoint(tmp_path, "checkpoint")
