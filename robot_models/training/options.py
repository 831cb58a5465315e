"""Checks of a command's options before its work starts.

Training and evaluation run for minutes to an hour: a value they cannot use (a
missing checkpoint file, an output path under a file, a step count of 0) must be
refused before data building starts, named by its option, so that a command line
says it in one argparse-style line instead of a traceback after the work.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

# What every loader of a planner checkpoint reads (HF Llama layout, our tokenizer).
CHECKPOINT_FILES = ("config.json", "tokenizer.json", "model.safetensors")


class OptionError(ValueError):
    """A value an option cannot take: `option` is its field name (`init_from`), `reason`
    what is wrong with it, in words that need no option name before them."""

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"{option}: {reason}")
        self.option = option
        self.reason = reason

    @property
    def flag(self) -> str:
        """The command-line flag of the option (`--init-from`)."""
        return "--" + self.option.replace("_", "-")

    def cli_message(self) -> str:
        """As argparse words its own errors: `argument --steps: must be at least 1, got 0`."""
        return f"argument {self.flag}: {self.reason}"


def at_least(option: str, value: int, least: int) -> None:
    """OptionError unless `value` >= `least`."""
    if value < least:
        raise OptionError(option, f"must be at least {least}, got {value}")


def check_output_dir(path: Path, option: str) -> None:
    """A folder a run writes into: an existing writable folder, or one that
    `mkdir(parents=True)` can create (its nearest existing ancestor a writable folder)."""
    if path.exists() and not path.is_dir():
        raise OptionError(option, f"{path} exists and is not a folder")
    ancestor = next(p for p in (path, *path.absolute().parents) if p.exists())
    if not ancestor.is_dir():
        raise OptionError(option, f"cannot create {path}: {ancestor} is a file")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OptionError(option, f"cannot write into {ancestor}")


def check_output_file(path: Path, option: str) -> None:
    """A file a run writes: not a folder, in an existing writable folder."""
    if path.is_dir():
        raise OptionError(option, f"{path} is a folder, not a file")
    folder = path.parent
    if not folder.exists():
        raise OptionError(option, f"cannot write {path}: no folder {folder}")
    if not folder.is_dir():
        raise OptionError(option, f"cannot write {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise OptionError(option, f"cannot write {path}: no permission")


def read_json_file(path: Path, option: str) -> Any:
    """The parsed contents of an input JSON file."""
    if not path.exists():
        raise OptionError(option, f"no file {path}")
    if not path.is_file():
        raise OptionError(option, f"{path} is not a file")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:  # JSONDecodeError, UnicodeDecodeError
        raise OptionError(option, f"{path} is not readable JSON ({error})") from None


def read_checkpoint(
    path: Path, option: str, also: tuple[str, ...] = ()
) -> tuple[dict[str, Any], Tokenizer]:
    """A checkpoint folder's config.json and tokenizer, after checking that it has
    every file a loader reads (`CHECKPOINT_FILES`, and `also`)."""
    if not path.exists():
        raise OptionError(option, f"no checkpoint folder {path}")
    if not path.is_dir():
        raise OptionError(option, f"{path} is a file, not a checkpoint folder")
    missing = [name for name in (*CHECKPOINT_FILES, *also) if not (path / name).is_file()]
    if missing:
        raise OptionError(option, f"checkpoint folder {path} has no {', '.join(missing)}")
    config = read_json_file(path / "config.json", option)
    if not isinstance(config, dict):
        raise OptionError(option, f"{path / 'config.json'} is not a JSON object")
    try:
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception as error:  # tokenizers raises a bare Exception
        reason = f"{path / 'tokenizer.json'} is not a tokenizer ({error})"
        raise OptionError(option, reason) from None
    return config, tokenizer
