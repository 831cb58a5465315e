"""The training run: data, tokenizer, model, prefix-shared optimisation, checkpoint."""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from robot_models.dataset import DEFAULT_SEED, DatasetSplit, Example, build_dataset
from robot_models.dataset.answers import answer_examples
from robot_models.dataset.build import DEFAULT_PER_TYPE, Generator, check_generator
from robot_models.dataset.observations import failure_examples
from robot_models.prompts import format_request, prompt_prefix
from robot_models.training.batches import (
    IGNORE,
    BatchSampler,
    EncodedExample,
    collate,
    encode_example,
    encode_prefix,
    fits,
)
from robot_models.training.hf_format import (
    EOS_TOKEN,
    PAD_TOKEN,
    has_tied_output,
    load_checkpoint,
    save_checkpoint,
    shape_from_config,
)
from robot_models.training.model import LlamaShape, TinyLlama
from robot_models.training.model_card import write_model_card
from robot_models.training.options import (
    OptionError,
    at_least,
    check_output_dir,
    read_checkpoint,
    read_json_file,
)
from robot_models.training.threads import flushed_denormals, torch_threads
from robot_models.training.tokenizer import (
    MIN_VOCAB_SIZE,
    VOCAB_SIZE,
    check_number_format,
    check_word_format,
    min_token_count,
    save_tokenizer,
    special_id,
    train_tokenizer,
)

PREFIX_WEIGHT_IN_TOKENIZER_CORPUS = 50  # the prefix precedes every request
# Families whose plans copy numbers from the instruction (distances, angles,
# coordinates), the hardest part to learn per token: seen twice as often in training
# (not in the held-out set).
OVERSAMPLED_FAMILIES = {"motion": 2, "move_to": 2}


@dataclass(frozen=True)
class TrainConfig:
    seed: int = DEFAULT_SEED
    steps: int = 2800  # in all, the prefix-tail steps included
    batch_size: int = 16
    # Curriculum: the first `tail_steps` steps see only the last `tail_tokens` tokens of
    # the robot's prefix (RoPE makes the offset irrelevant), in batches of
    # `tail_batch_size`. Attention over the full prefix is most of a step's cost, and a
    # short context is where the model first learns to copy objects and numbers from
    # the request; the remaining steps adapt it to the full prefix that inference sees.
    tail_steps: int = 1800
    tail_tokens: int = 64
    tail_batch_size: int = 32
    lr: float = 3e-3  # peak learning rate of the prefix-tail phase
    full_lr: float = 1e-3  # peak learning rate of the full-prefix phase
    warmup_steps: int = 30  # per phase
    weight_decay: float = 0.01
    hidden_size: int = 192
    intermediate_size: int = 512
    num_hidden_layers: int = 4
    num_attention_heads: int = 6
    num_key_value_heads: int = 2
    # The longest prompt + plan the model takes (the spaced word format makes the
    # prefix about 1.4 times longer).
    max_positions: int = 2048
    threads: int = 2
    # Backpropagate through the shared prefix too. Off by default: the prefix K/V are
    # still computed with the current weights every step (so training sees exactly
    # what inference sees), only their gradient is skipped, which cuts the step cost.
    prefix_grad: bool = False
    # Continue from this checkpoint (its weights and tokenizer) instead of starting from
    # scratch; the run's statistics then record both stages.
    init_from: str = ""
    save_every: int = 0  # also write the checkpoint every N steps (0: only at the end)
    lrtrace_repeats: int = 64  # the 11 LRTrace tasks are oversampled so they are learned exactly
    # Training examples per robot type beyond the data set's default, from their own
    # random stream (the held-out split is unchanged): more distinct numbers and
    # objects to copy, at the same number of steps.
    extra_examples: int = 0
    examples: int = DEFAULT_PER_TYPE  # distinct generated examples per robot type
    # How numbers are tokenized (training/tokenizer.py): "place" (digits marked with
    # their place), "digits" (plain digits) or "whole" (one token per number 0..999;
    # the two runs with it and tied embeddings in robot_models/README.md planned more
    # held-out tasks exactly but not more of them validly).
    numbers: str = "place"
    # Which data generator (dataset/build.py): "templates", the fixed request templates
    # of the shipped checkpoint, "frames", task frames realised by a grammar of
    # requests over an open lexicon (issue #22), or "mixed", the templates' split with
    # as many frames examples again in training.
    data: str = "templates"
    # How words meet spaces (training/tokenizer.py): "attached" (GPT-2's `Ġword`) or
    # "spaced" (every space a token of its own, so an object name is the same ids in
    # the instruction and in a quoted plan string).
    words: str = "attached"
    # Plans that react (issue #23): this fraction of the generated training examples
    # also appears with one statement failed, the failure as the service appends it,
    # and a recovery after it (dataset/observations.py); observations are not targets.
    observations: float = 0.0
    # ... and this fraction with a perception tool's answers after the statements that
    # ask them, the plan going on unchanged (dataset/answers.py); each LRTrace task
    # that asks one is also shown answered, `LRTRACE_ANSWERED` times.
    answers: float = 0.0
    vocab_size: int = VOCAB_SIZE  # BPE tokens (the `whole` format's number tokens on top)
    # The output layer shares the input embeddings (saved as an equal untied copy).
    tie_embeddings: bool = False
    # Where the model trains: "cpu" (the shipped recipe, 60 minutes on 2 cores) or a
    # torch accelerator such as "cuda" for experiments; the checkpoint is saved fp32
    # either way, so every loader reads it the same.
    device: str = "cpu"

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """OptionError naming the first field whose value the run cannot use: checked
        when the config is made, so a bad value never reaches data building."""
        for name, least in _LEAST.items():
            at_least(name, getattr(self, name), least)
        for name in ("lr", "full_lr"):
            _positive(name, getattr(self, name))
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise OptionError("weight_decay", f"must be 0 or more, got {self.weight_decay}")
        for name in ("observations", "answers"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise OptionError(name, f"must be a fraction in [0, 1], got {value}")
        if not -(2**63) <= self.seed < 2**64:
            raise OptionError("seed", f"must be a 64-bit integer (torch's seeds), got {self.seed}")
        if self.tail_steps > self.steps:
            raise OptionError(
                "tail_steps",
                f"must be at most steps ({self.steps}), got {self.tail_steps}: "
                "the prefix-tail steps are the first of all the steps",
            )
        self._check_heads()
        for name, check in _CHOICES.items():
            try:
                check(getattr(self, name))
            except ValueError as error:
                raise OptionError(name, str(error)) from None

    def _check_heads(self) -> None:
        """The attention shape: heads split the hidden size evenly into heads of even
        width (RoPE rotates half of each), and key/value heads are shared by equal
        groups of query heads (grouped-query attention)."""
        hidden, heads, kv_heads = (
            self.hidden_size,
            self.num_attention_heads,
            self.num_key_value_heads,
        )
        if hidden % heads or (hidden // heads) % 2:
            raise OptionError(
                "num_attention_heads",
                f"{heads} heads must split hidden_size {hidden} into heads of an even width",
            )
        if heads % kv_heads:
            raise OptionError(
                "num_key_value_heads",
                f"{kv_heads} must divide num_attention_heads {heads} "
                "(each key/value head serves a group of query heads)",
            )


# The least value of each integer field the training loop can run with.
_LEAST = {
    "steps": 1,
    "batch_size": 1,
    "tail_steps": 0,
    "tail_tokens": 1,
    "tail_batch_size": 1,
    "warmup_steps": 0,
    "hidden_size": 1,
    "intermediate_size": 1,
    "num_hidden_layers": 1,
    "num_attention_heads": 1,
    "num_key_value_heads": 1,
    "max_positions": 2,
    "threads": 1,
    "save_every": 0,
    "lrtrace_repeats": 0,
    "extra_examples": 0,
    "examples": 1,
    "vocab_size": MIN_VOCAB_SIZE,
}


def _positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise OptionError(name, f"must be a number above 0, got {value}")


def check_device(device: str) -> None:
    """ValueError unless `device` names a torch device this machine has."""
    try:
        kind = torch.device(device).type
    except RuntimeError as error:
        raise ValueError(f"{device!r} is not a torch device ({error})") from None
    backend = getattr(torch, kind, None)
    available = getattr(backend, "is_available", None)
    if kind != "cpu" and not (callable(available) and available()):
        raise ValueError(f"no {kind} device is available on this machine (asked for {device!r})")


# Fields whose value is one of a set (or a device of this machine), by their checks.
_CHOICES: dict[str, Callable[[Any], None]] = {
    "device": check_device,
    "numbers": check_number_format,
    "data": check_generator,
    "words": check_word_format,
}


def check_run(config: TrainConfig, out_dir: Path) -> None:
    """OptionError for what a run with `config` into `out_dir` would fail on that the
    config's own values do not show: the output folder, the checkpoint it goes on
    from, whether the model's positions hold the prompt. Cheap: no data is built."""
    check_output_dir(out_dir, "out")
    tokenizer = _check_init_from(config) if config.init_from else None
    _check_prefix_fits(config, tokenizer)


def _check_init_from(config: TrainConfig) -> Tokenizer:
    """The tokenizer of `config.init_from`, a checkpoint whose shape the run keeps."""
    path = Path(config.init_from)
    hf_config, tokenizer = read_checkpoint(path, "init_from", also=("train_stats.json",))
    if not isinstance(read_json_file(path / "train_stats.json", "init_from"), dict):
        raise OptionError("init_from", f"{path / 'train_stats.json'} is not a JSON object")
    try:
        have = shape_from_config(hf_config)
    except KeyError as error:
        raise OptionError("init_from", f"{path / 'config.json'} has no {error}") from None
    want = model_shape(config, tokenizer.get_vocab_size())
    if have != want:
        raise OptionError("init_from", f"the checkpoint {path} has {_shape_difference(have, want)}")
    if config.tie_embeddings and not has_tied_output(path):
        raise OptionError(
            "tie_embeddings", f"{path} was trained with an untied output layer; it cannot be tied"
        )
    return tokenizer


def _shape_difference(have: LlamaShape, want: LlamaShape) -> str:
    """`shape a=1, b=2; the options ask a=3, b=4` over the fields that differ."""
    differ = [f.name for f in fields(LlamaShape) if getattr(have, f.name) != getattr(want, f.name)]
    return (
        f"shape {', '.join(f'{n}={getattr(have, n)}' for n in differ)}; "
        f"the options ask {', '.join(f'{n}={getattr(want, n)}' for n in differ)}"
    )


def _check_prefix_fits(config: TrainConfig, tokenizer: Tokenizer | None) -> None:
    """`max_positions` must hold each robot's prompt prefix and a request: counted with
    `tokenizer` (`init_from`'s, or the one the run trained), else bounded below
    (`min_token_count`), since the tokenizer a run trains is only known after its
    data is built."""
    for robot_type in ("drone", "arm"):
        prefix = prompt_prefix(robot_type)
        if tokenizer is not None:
            count = len(tokenizer.encode(prefix).ids)
            what = f"{count} tokens"
        else:
            count = min_token_count(prefix, config.numbers, config.words)
            what = f"at least {count} tokens with --numbers {config.numbers} --words {config.words}"
        if count >= config.max_positions:
            raise OptionError(
                "max_positions",
                f"{config.max_positions} positions cannot hold the {robot_type} prompt "
                f"prefix ({what}) and a request",
            )


def model_shape(config: TrainConfig, vocab_size: int) -> LlamaShape:
    """The shape of the model `config` trains, with a tokenizer of `vocab_size`."""
    return LlamaShape(
        vocab_size=vocab_size,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_positions,
    )


# Answered variants of each LRTrace task that asks (each with its own answers):
# the tasks are learned exactly, as their answered forms must be.
LRTRACE_ANSWERED = 32


def training_data(config: TrainConfig) -> DatasetSplit:
    """The examples a run with `config` trains on (and its held-out split)."""
    data = build_dataset(
        config.seed,
        per_type=config.examples,
        extra_per_type=config.extra_examples,
        generator=cast(Generator, config.data),
    )
    extra: list[Example] = []
    if config.observations:
        rng = random.Random(config.seed + 5)
        extra += failure_examples(list(data.train), config.observations, rng)
    if config.answers:
        rng = random.Random(config.seed + 6)
        extra += answer_examples(list(data.train), config.answers, rng)
        for _ in range(LRTRACE_ANSWERED):
            extra += answer_examples(list(data.lrtrace), 1.0, rng)
    return replace(data, train=data.train + tuple(extra)) if extra else data


def training_tokenizer(
    data: DatasetSplit, numbers: str, words: str = "attached", vocab_size: int = VOCAB_SIZE
) -> Tokenizer:
    """The BPE tokenizer trained on the prefixes, requests and plans of `data`'s
    training examples and LRTrace tasks (the held-out split never reaches it)."""
    seen = (*data.train, *data.lrtrace)
    corpus = [prompt_prefix(t) for t in ("drone", "arm")] * PREFIX_WEIGHT_IN_TOKENIZER_CORPUS
    corpus += [format_request(e.scene, e.instruction) for e in seen] + [e.plan for e in seen]
    return train_tokenizer(corpus, vocab_size, numbers, words)


def _lr_at(step: int, config: TrainConfig) -> float:
    """Each phase has its own warmup and cosine decay to 5% of its peak: `lr` for the
    prefix-tail phase, `full_lr` for the full-prefix phase. The full phase starts from
    a model that already plans; it adapts it to attend past the long prefix, which a
    schedule already decayed to its floor barely does."""
    if step < config.tail_steps:
        return _warmup_cosine(step, config.tail_steps, config.lr, config.warmup_steps)
    return _warmup_cosine(
        step - config.tail_steps,
        config.steps - config.tail_steps,
        config.full_lr,
        config.warmup_steps,
    )


def _warmup_cosine(step: int, total: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))


def optimizer_step(
    logits: torch.Tensor,
    targets: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    parameters: Iterable[torch.nn.Parameter],
) -> float:
    """Cross-entropy of `logits` against `targets` (IGNORE masked), back-propagated,
    gradients clipped to norm 1, one optimizer step; returns the loss."""
    loss = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE
    )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, 1.0)
    optimizer.step()
    return float(loss.item())


def train(
    config: TrainConfig, out_dir: Path, log: Callable[[str], None] = print
) -> dict[str, float]:
    """Train from scratch (or on from `config.init_from`) and write the checkpoint to
    `out_dir`; returns run statistics. OptionError before any work if the run could
    not finish (`check_run`)."""
    check_run(config, out_dir)
    with torch_threads(config.threads), flushed_denormals():
        return _train(config, out_dir, log)


def _train(
    config: TrainConfig, out_dir: Path, log: Callable[[str], None] = print
) -> dict[str, float]:
    started = time.monotonic()
    torch.manual_seed(config.seed)
    data = training_data(config)
    if config.init_from:
        tokenizer = Tokenizer.from_file(str(Path(config.init_from) / "tokenizer.json"))
    else:
        tokenizer = training_tokenizer(data, config.numbers, config.words, config.vocab_size)
    _check_prefix_fits(config, tokenizer)  # exactly, now that the tokenizer is known
    eos_id, pad_id = special_id(tokenizer, EOS_TOKEN), special_id(tokenizer, PAD_TOKEN)
    device = torch.device(config.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # fp32 weights, TF32 products
    prefixes = {t: encode_prefix(tokenizer, t).to(device) for t in ("drone", "arm")}
    prefix_lens = {t: p.shape[1] for t, p in prefixes.items()}
    encoded = []
    too_long = 0
    for example in data.train:  # each encoded once, repeated by reference
        one = encode_example(tokenizer, example, eos_id)
        if not fits(one, prefix_lens, config.max_positions):
            too_long += 1
            continue
        encoded += [one] * OVERSAMPLED_FAMILIES.get(example.family, 1)
    if too_long:
        log(f"{too_long} training examples longer than {config.max_positions} positions left out")
    lrtrace = [encode_example(tokenizer, e, eos_id) for e in data.lrtrace]
    encoded += lrtrace * config.lrtrace_repeats
    _check_examples_fit(encoded, prefix_lens, config.max_positions)
    sampler = BatchSampler(encoded, config.batch_size, config.seed)
    tail_sampler = BatchSampler(encoded, config.tail_batch_size, config.seed + 1)

    model = TinyLlama(model_shape(config, tokenizer.get_vocab_size()), config.tie_embeddings)
    earlier: list[dict[str, object]] = []
    if config.init_from:  # its shape is the config's (`check_run`)
        model = load_checkpoint(Path(config.init_from), config.tie_embeddings)
        model.train()
        earlier_stats = json.loads((Path(config.init_from) / "train_stats.json").read_text())
        earlier = [*earlier_stats.get("earlier_stages", []), earlier_stats]
    model.to(device)
    params = sum(p.numel() for p in model.parameters())
    log(
        f"data: {len(data.train)} train, {len(data.heldout)} held-out, "
        f"{len(data.lrtrace)} LRTrace; prefix tokens drone {prefixes['drone'].shape[1]}, "
        f"arm {prefixes['arm'].shape[1]}; params {params}"
    )
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(0.9, 0.95), weight_decay=config.weight_decay
    )
    model.train()
    recent: list[float] = []
    loads: list[float] = []

    def run_stats(steps_done: int) -> dict[str, float]:
        return {
            "steps_done": float(steps_done),
            "train_seconds": time.monotonic() - started,
            "final_loss": sum(recent) / len(recent),
            "parameters": float(params),
            "prefix_tokens_drone": float(prefixes["drone"].shape[1]),
            "prefix_tokens_arm": float(prefixes["arm"].shape[1]),
            "train_examples": float(len(data.train)),
            "heldout_examples": float(len(data.heldout)),
            "load_min": min(loads, default=0.0),
            "load_max": max(loads, default=0.0),
        }

    for step in range(config.steps):
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, config)
        in_tail = step < config.tail_steps
        robot_type, batch = (tail_sampler if in_tail else sampler).next()
        ids, targets = (t.to(device, non_blocking=True) for t in collate(batch, pad_id))
        prefix = prefixes[robot_type]
        if in_tail:
            prefix = prefix[:, -config.tail_tokens :]
        with torch.set_grad_enabled(config.prefix_grad):
            _, prefix_kv = model(prefix)  # once per batch, shared by all rows
        logits, _ = model(ids, past=prefix_kv)
        recent = [*recent[-19:], optimizer_step(logits, targets, optimizer, model.parameters())]
        done = step + 1
        if config.save_every and done % config.save_every == 0 and done < config.steps:
            write_run(model, out_dir, tokenizer, config, run_stats(done), earlier, log)
            model.train()
        if step % 10 == 0 or step == config.steps - 1:
            loads.append(os.getloadavg()[0])
            log(
                f"step {step:4d}/{config.steps} {robot_type:5s} "
                f"{'tail' if in_tail else 'full'} "
                f"loss {sum(recent) / len(recent):.4f} lr {_lr_at(step, config):.2e} "
                f"elapsed {time.monotonic() - started:7.1f} s"
            )
    return write_run(model, out_dir, tokenizer, config, run_stats(config.steps), earlier, log)


def _check_examples_fit(
    encoded: list[EncodedExample], prefix_lens: dict[str, int], max_positions: int
) -> None:
    """OptionError unless every example trained (LRTrace tasks are never left out) fits
    after its prefix and each robot type has one: known only with the tokenizer,
    still before the first step."""
    for example in encoded:
        if not fits(example, prefix_lens, max_positions):
            needed = prefix_lens[example.robot_type] + len(example.suffix_ids)
            raise OptionError(
                "max_positions",
                f"{max_positions} positions cannot hold an LRTrace task of the "
                f"{example.robot_type} ({needed} tokens with its prefix)",
            )
    for robot_type in ("drone", "arm"):
        if not any(e.robot_type == robot_type for e in encoded):
            raise OptionError(
                "max_positions",
                f"no {robot_type} training example fits in {max_positions} positions",
            )


def write_run(
    model: TinyLlama,
    out_dir: Path,
    tokenizer: Tokenizer,
    config: TrainConfig,
    stats: dict[str, float],
    earlier: list[dict[str, object]],
    log: Callable[[str], None] = print,
) -> dict[str, float]:
    """Checkpoint, tokenizer, statistics and model card into `out_dir`."""
    drop_stale_evaluation(out_dir, log)
    model.eval()
    eos_id, pad_id = special_id(tokenizer, EOS_TOKEN), special_id(tokenizer, PAD_TOKEN)
    save_checkpoint(model, out_dir, eos_id, pad_id)
    save_tokenizer(tokenizer, out_dir, model.shape.max_position_embeddings)
    record = {"config": asdict(config), **stats, "earlier_stages": earlier}
    (out_dir / "train_stats.json").write_text(json.dumps(record, indent=2) + "\n")
    write_model_card(out_dir)
    return stats


def drop_stale_evaluation(out_dir: Path, log: Callable[[str], None] = print) -> None:
    """Remove `out_dir`'s eval.json before new weights are written there: its figures
    (from `evaluate --update-card`) measured the earlier weights, and left in place
    they would pass for the new checkpoint's. Removed first, so a run interrupted while
    writing never leaves figures beside weights they do not describe."""
    stale = out_dir / "eval.json"
    if stale.is_file():
        stale.unlink()
        log(
            f"removed {stale}: it evaluated the earlier checkpoint "
            "(`python -m robot_models.evaluate --update-card` measures the new one)"
        )
