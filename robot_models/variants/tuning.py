"""The step loop both kinds of fleet variant train with (a LoRA adapter, a full
fine-tune of the last layers): seeded batches of the variant's examples after the
robot's prompt prefix, whose KV runs through the current weights without gradient
(as served), warm-up then linear decay of the learning rate, progress every 10
steps, and the run's figures in train_stats.json."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from robot_models.training.batches import EncodedExample, collate, encode_example, encode_prefix
from robot_models.training.hf_format import load_checkpoint
from robot_models.training.loop import optimizer_step
from robot_models.training.model import TinyLlama
from robot_models.variants.data import VariantData


@dataclass
class TuningBase:
    """The base checkpoint loaded for training, with the variant's examples and the
    robot's prompt prefix encoded by its tokenizer."""

    model: TinyLlama
    tokenizer: Tokenizer
    eos_id: int
    pad_id: int
    tied: bool  # lm_head tied to the embeddings
    encoded: list[EncodedExample]
    prefix: torch.Tensor


def load_tuning_base(base: Path, robot_type: str, data: VariantData) -> TuningBase:
    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    hf = json.loads((base / "config.json").read_text())
    eos_id, pad_id = int(hf["eos_token_id"]), int(hf["pad_token_id"])
    tied = bool(hf.get("tie_word_embeddings", False))
    return TuningBase(
        load_checkpoint(base, tied),
        tokenizer,
        eos_id,
        pad_id,
        tied,
        [encode_example(tokenizer, e, eos_id) for e in data.train],
        encode_prefix(tokenizer, robot_type),
    )


@dataclass(frozen=True)
class TuningRun:
    """What the loop needs of a variant's training config."""

    steps: int
    batch_size: int
    lr: float
    warmup_steps: int
    prefix_every: int = 1  # steps between recomputing the prefix KV


def tuning_lr(step: int, run: TuningRun) -> float:
    """Linear warm-up, then linear decay to 5% of `run.lr`."""
    if step < run.warmup_steps:
        return run.lr * (step + 1) / run.warmup_steps
    return run.lr * max(0.05, 1 - (step - run.warmup_steps) / max(1, run.steps))


def tune(
    model: torch.nn.Module,
    parameters: Sequence[torch.nn.Parameter],
    encoded: Sequence[EncodedExample],
    prefix: torch.Tensor,
    pad_id: int,
    run: TuningRun,
    rng: random.Random,
    log: Callable[[str], None],
) -> list[float]:
    """Train `parameters` (the others frozen) for `run.steps`; the last 20 losses."""
    optimizer = torch.optim.AdamW(list(parameters), lr=run.lr, weight_decay=0.0)
    started = time.monotonic()
    model.train()
    recent: list[float] = []
    prefix_kv: Any = None
    for step in range(run.steps):
        for group in optimizer.param_groups:
            group["lr"] = tuning_lr(step, run)
        batch = sorted(rng.sample(list(encoded), run.batch_size), key=lambda e: len(e.suffix_ids))
        ids, targets = collate(batch, pad_id)
        if step % run.prefix_every == 0:
            with torch.no_grad():
                _, prefix_kv = model(prefix)
        logits, _ = model(ids, past=prefix_kv)
        recent = [*recent[-19:], optimizer_step(logits, targets, optimizer, parameters)]
        if step % 10 == 0 or step == run.steps - 1:
            log(
                f"step {step:4d}/{run.steps} loss {sum(recent) / len(recent):.4f} "
                f"lr {tuning_lr(step, run):.2e} elapsed {time.monotonic() - started:6.1f} s "
                f"load {os.getloadavg()[0]:.1f}"
            )
    return recent


def write_stats(
    out_dir: Path,
    config: dict[str, Any],
    steps: int,
    started: float,
    recent: list[float],
    trainable: int,
) -> dict[str, float]:
    """train_stats.json: the config and the run's figures (returned)."""
    stats = {
        "steps_done": float(steps),
        "train_seconds": time.monotonic() - started,
        "final_loss": sum(recent) / max(1, len(recent)),
        "trainable_parameters": float(trainable),
    }
    record = {"config": config, **stats}
    (out_dir / "train_stats.json").write_text(json.dumps(record, indent=2) + "\n")
    return stats
