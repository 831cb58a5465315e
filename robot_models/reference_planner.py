"""Greedy planning with Hugging Face transformers: the reference implementation
that `evaluate` and the checkpoint tests use (transformers is a dev dependency,
imported only here).

Prompt ids follow the contract in `prompts.py`; the prefix KV cache of each robot
type is computed once and copied for every request (HF's documented prompt-reuse
pattern), which gives the same greedy output as running the full prompt.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from robot_models.checkpoints import default_planner_path
from robot_models.prompts import format_request, prompt_prefix
from robot_models.skills import check_robot_type
from robot_models.training.options import OptionError, read_checkpoint

DEFAULT_MAX_NEW_TOKENS = 256


class ReferencePlanner:
    """A checkpoint loaded with `transformers.LlamaForCausalLM`, decoding greedily."""

    def __init__(self, path: Path | None = None, adapter: Path | None = None) -> None:
        """`adapter`: a peft LoRA adapter folder of this checkpoint, merged into the
        weights (peft `merge_and_unload`)."""
        self.path = path or default_planner_path()
        # OptionError naming the folder and the file it lacks, not a loader's traceback
        config, self.tokenizer = read_checkpoint(self.path, "checkpoint")
        self.tokenizer.encode_special_tokens = True  # a request's `<eos>` is text, as served
        self.eos_id: int = _token_id(config, "eos_token_id", self.path)
        self.pad_id: int = _token_id(config, "pad_token_id", self.path)
        from transformers import DynamicCache, LlamaForCausalLM

        self.model: Any = LlamaForCausalLM.from_pretrained(self.path, dtype=torch.float32).eval()
        if adapter is not None:
            from peft import PeftModel

            self.model = PeftModel.from_pretrained(self.model, str(adapter)).merge_and_unload()
        self._cache_type = DynamicCache
        # transformers 5 renamed the KV-cache argument to `cache` (`past_key_values` is
        # deprecated and leaves forward in 5.40); transformers 4 knows only the old name.
        takes_cache = "cache" in inspect.signature(LlamaForCausalLM.forward).parameters
        self._cache_arg = "cache" if takes_cache else "past_key_values"
        self._prefix: dict[str, tuple[list[int], Any]] = {}

    def prompt_ids(self, robot_type: str, scene: str, instruction: str) -> list[int]:
        """encode(prefix) + encode(request), each part encoded on its own."""
        check_robot_type(robot_type)
        prefix = self.tokenizer.encode(prompt_prefix(robot_type)).ids
        return prefix + self.tokenizer.encode(format_request(scene, instruction)).ids

    def _prefix_cache(self, robot_type: str) -> tuple[list[int], Any]:
        if robot_type not in self._prefix:
            ids = self.tokenizer.encode(prompt_prefix(robot_type)).ids
            cache = self._cache_type()
            with torch.no_grad():
                self.model(torch.tensor([ids]), use_cache=True, **{self._cache_arg: cache})
            self._prefix[robot_type] = (ids, cache)
        return self._prefix[robot_type]

    def generate_ids(
        self,
        robot_type: str,
        scene: str,
        instruction: str,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        written: Sequence[str] = (),
    ) -> list[int]:
        """Greedy continuation of the prompt, up to and including EOS if emitted.
        `written`: plan text already there (what the planner wrote, observations the
        service appended), each piece encoded on its own as the service appends it."""
        ids = self.prompt_ids(robot_type, scene, instruction)
        for piece in written:
            ids += self.tokenizer.encode(piece).ids
        prefix_ids, prefix_cache = self._prefix_cache(robot_type)
        if ids[: len(prefix_ids)] != prefix_ids:  # pragma: no cover - guarded by the contract
            raise RuntimeError("the prompt does not start with the robot's prefix")
        inputs = torch.tensor([ids])
        with torch.no_grad():
            out = self.model.generate(
                inputs,
                attention_mask=torch.ones_like(inputs),
                **{self._cache_arg: copy.deepcopy(prefix_cache)},
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=self.eos_id,
                pad_token_id=self.pad_id,
            )
        return [int(t) for t in out[0, len(ids) :].tolist()]

    def plan_batch(
        self,
        robot_type: str,
        requests: Sequence[tuple[str, str]],
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    ) -> list[tuple[str, bool]]:
        """`plan` for several (scene, instruction) pairs of one robot type at once. Rows
        are prefix + padding + request; the padding is masked out and HF derives the
        positions from the attention mask, so each row decodes as it would alone."""
        prefix_ids, prefix_cache = self._prefix_cache(robot_type)
        encoded = [self.tokenizer.encode(format_request(s, i)).ids for s, i in requests]
        width = max(len(r) for r in encoded)
        rows = [prefix_ids + [self.pad_id] * (width - len(r)) + r for r in encoded]
        mask = [[1] * len(prefix_ids) + [0] * (width - len(r)) + [1] * len(r) for r in encoded]
        cache = copy.deepcopy(prefix_cache)
        cache.batch_repeat_interleave(len(rows))
        inputs = torch.tensor(rows)
        with torch.no_grad():
            out = self.model.generate(
                inputs,
                attention_mask=torch.tensor(mask),
                **{self._cache_arg: cache},
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=self.eos_id,
                pad_token_id=self.pad_id,
            )
        return [self._finish(row[inputs.shape[1] :].tolist()) for row in out]

    def _finish(self, new: list[int]) -> tuple[str, bool]:
        """Decode generated ids, cut at the first EOS (rows of a batch keep padding)."""
        if self.eos_id in new:
            return self.tokenizer.decode(new[: new.index(self.eos_id)]), True
        return self.tokenizer.decode(new), False

    def plan(
        self,
        robot_type: str,
        scene: str,
        instruction: str,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        written: Sequence[str] = (),
    ) -> tuple[str, bool]:
        """(plan text after `written`, whether the model ended it with EOS)."""
        ids = self.generate_ids(robot_type, scene, instruction, max_new_tokens, written)
        return self._finish(ids)


def _token_id(config: dict[str, Any], key: str, path: Path) -> int:
    """A special token's id from a checkpoint's config.json, which decoding needs."""
    value = config.get(key)
    if not isinstance(value, int):
        raise OptionError("checkpoint", f"{path / 'config.json'} has no integer {key}")
    return value
