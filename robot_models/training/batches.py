"""Turning examples into token ids under the tokenization contract, and batching
them per robot type so the shared prompt prefix runs once per batch."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer

from robot_models.dataset import Example
from robot_models.prompts import format_request, prompt_prefix

IGNORE = -100


@dataclass(frozen=True)
class EncodedExample:
    """ids after the prefix: encode(request) + encode(plan) + [eos], the plan encoded
    piece by piece around its observations (as the service appends them)."""

    robot_type: str
    suffix_ids: tuple[int, ...]
    request_len: int  # the first request_len suffix ids are prompt, the rest is the target
    masked: tuple[tuple[int, int], ...] = ()  # [start, end) suffix ids that are input


def fits(example: EncodedExample, prefix_lens: dict[str, int], max_positions: int) -> bool:
    """Whether the robot's prefix and the example fit the model's positions (a long
    generated plan, such as a desk of six objects, may not)."""
    return prefix_lens[example.robot_type] + len(example.suffix_ids) <= max_positions


def encode_example(tokenizer: Tokenizer, example: Example, eos_id: int) -> EncodedExample:
    request = tokenizer.encode(format_request(example.scene, example.instruction)).ids
    ids, masked = list(request), []
    for text, is_observation in example.pieces():  # each encoded on its own, as served
        piece = tokenizer.encode(text).ids
        if is_observation:
            masked.append((len(ids), len(ids) + len(piece)))
        ids += piece
    return EncodedExample(example.robot_type, (*ids, eos_id), len(request), tuple(masked))


def encode_prefix(tokenizer: Tokenizer, robot_type: str) -> torch.Tensor:
    """[1, prefix_len] ids of the robot type's fixed prompt."""
    return torch.tensor([tokenizer.encode(prompt_prefix(robot_type)).ids], dtype=torch.long)


def collate(batch: Sequence[EncodedExample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded suffix ids [B, S] and next-token targets [B, S] (IGNORE outside the
    plan and EOS, and where the next id is an observation's). Target t is the id at
    t+1; the last prefix token's prediction of the first request token is not trained."""
    width = max(len(e.suffix_ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    targets = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    for row, example in enumerate(batch):
        n = len(example.suffix_ids)
        ids[row, :n] = torch.tensor(example.suffix_ids)
        start = example.request_len - 1  # predicts the first plan token
        targets[row, start : n - 1] = torch.tensor(example.suffix_ids[start + 1 : n])
        for first, end in example.masked:
            targets[row, first - 1 : end - 1] = IGNORE
    return ids, targets


BUCKET_BATCHES = 8


class BatchSampler:
    """Endless batches, each of one robot type; robot types alternate.

    Batches are drawn `BUCKET_BATCHES` at a time from the shuffled examples and cut
    after sorting by length, so rows of a batch have similar lengths: arm plans run
    from 15 to 200 tokens, and padding would otherwise be a third of the compute."""

    def __init__(self, examples: Sequence[EncodedExample], batch_size: int, seed: int) -> None:
        self._rng = random.Random(seed)
        self._batch_size = batch_size
        self._pools = {t: [e for e in examples if e.robot_type == t] for t in ("drone", "arm")}
        self._orders: dict[str, list[EncodedExample]] = {t: [] for t in self._pools}
        self._ready: dict[str, list[list[EncodedExample]]] = {t: [] for t in self._pools}
        self._turn = 0

    def next(self) -> tuple[str, list[EncodedExample]]:
        robot_type = ("drone", "arm")[self._turn % 2]
        self._turn += 1
        ready = self._ready[robot_type]
        if not ready:
            drawn = sorted(
                (self._draw(robot_type) for _ in range(self._batch_size * BUCKET_BATCHES)),
                key=lambda e: len(e.suffix_ids),
            )
            ready.extend(
                drawn[i : i + self._batch_size] for i in range(0, len(drawn), self._batch_size)
            )
            self._rng.shuffle(ready)
        return robot_type, ready.pop()

    def _draw(self, robot_type: str) -> EncodedExample:
        order = self._orders[robot_type]
        if not order:
            order.extend(self._pools[robot_type])
            self._rng.shuffle(order)
        return order.pop()
