"""Whether a vLLM server serves the engine's checkpoint, asked of the server itself.

The engine sends token ids, never text: a server started on another model takes
them and decodes a plausible-looking but random plan, with no error anywhere. So
before its first request each server's answers are compared with the local
checkpoint, cheaply (no decode step when the model matches):

- `/v1/models`: its context (`max_model_len`) must fit the checkpoint's positions,
  and where its `root` is an absolute local path, that checkpoint's config must be
  ours (same host, other folder);
- `/tokenize` of a probe text must give the local tokenizer's ids (vocabulary and
  merges);
- a prompt of the first id past the local vocabulary must be refused as out of
  vocabulary (a larger model's vocabulary accepts it).

A check the server cannot answer (an endpoint missing, an unexpected reply) is
skipped rather than held against it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# words, numbers and punctuation of the robots' languages: many merges
PROBE_TEXT = "fly_to(x=12.5, y=-3) ; pick up the red box, then land at base 7."
# the config fields that tell two checkpoints apart
ARCHITECTURE_KEYS = ("model_type", "vocab_size", "hidden_size", "num_hidden_layers")


@dataclass(frozen=True)
class LocalModel:
    """What the servers' answers are compared with."""

    path: Path
    config: dict[str, Any]
    probe_ids: tuple[int, ...] | None  # the local tokenizer's ids of PROBE_TEXT
    tokenizer_size: int  # ids the local tokenizer can produce (0: no tokenizer)

    @classmethod
    def read(cls, path: Path, config: dict[str, Any]) -> LocalModel:
        probe_ids, size = None, 0
        if (path / "tokenizer.json").is_file():
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
            probe_ids = tuple(tokenizer.encode(PROBE_TEXT, add_special_tokens=False).ids)
            size = int(tokenizer.get_vocab_size(with_added_tokens=True))
        return cls(path, config, probe_ids, size)

    @property
    def vocab_size(self) -> int:
        return int(self.config["vocab_size"])

    @property
    def out_of_vocab_id(self) -> int:
        """The first id neither the checkpoint nor its tokenizer has."""
        return max(self.vocab_size, self.tokenizer_size)


def base_card(cards: list[dict[str, Any]]) -> dict[str, Any]:
    """The base model's card of /v1/models (LoRA adapters name a parent)."""
    return next(c for c in cards if not c.get("parent"))


def served_loras(cards: list[dict[str, Any]]) -> frozenset[str]:
    """The LoRA adapters a server lists in /v1/models: vLLM lists each (started with
    `--lora-modules`, or loaded at run time) as a card whose `parent` is the base."""
    return frozenset(str(c["id"]) for c in cards if c.get("parent"))


def card_mismatch(local: LocalModel, card: dict[str, Any]) -> str | None:
    """Why the /v1/models card is not the checkpoint's (None: no sign of it)."""
    positions = local.config.get("max_position_embeddings")
    length = card.get("max_model_len")
    if positions and length and int(length) > int(positions):
        return (
            f"its context of {length} tokens exceeds the checkpoint's "
            f"max_position_embeddings={positions}"
        )
    root = Path(str(card.get("root") or ""))
    if root.is_absolute() and (root / "config.json").is_file():
        try:
            theirs = json.loads((root / "config.json").read_text())
        except (OSError, ValueError):
            return None
        differ = [k for k in ARCHITECTURE_KEYS if theirs.get(k) != local.config.get(k)]
        if differ and root.resolve() != local.path.resolve():
            return f"its checkpoint {root} differs from {local.path} in {', '.join(differ)}"
    return None


def tokenize_body(model: str) -> dict[str, Any]:
    return {"model": model, "prompt": PROBE_TEXT, "add_special_tokens": False}


def tokenizer_mismatch(local: LocalModel, status: int, reply: Any) -> str | None:
    """Why the server's /tokenize answer is not the local tokenizer's."""
    if local.probe_ids is None or status != 200 or not isinstance(reply, dict):
        return None  # nothing to compare (no endpoint, no local tokenizer)
    tokens = reply.get("tokens")
    if not isinstance(tokens, list) or tuple(tokens) == local.probe_ids:
        return None
    return (
        f"its tokenizer gives other ids for {PROBE_TEXT!r} ({tokens[:8]}... against "
        f"the checkpoint's {list(local.probe_ids[:8])}...)"
    )


def vocab_body(local: LocalModel, model: str) -> dict[str, Any]:
    """A one-token request whose prompt is the first id past the local vocabulary."""
    return {"model": model, "prompt": [local.out_of_vocab_id], "max_tokens": 1}


def vocab_mismatch(local: LocalModel, status: int) -> str | None:
    """A server that accepted the out-of-vocabulary prompt has a larger vocabulary."""
    if status != 200:
        return None  # refused (out of vocabulary, as expected) or unclear: no sign
    return (
        f"it accepts token id {local.out_of_vocab_id}, past the checkpoint's vocabulary "
        f"of {local.vocab_size}: its model has a larger one"
    )


def mismatch_reason(local: LocalModel, card: dict[str, Any], why: str) -> str:
    return (
        f"serves another model than {local.path} (/v1/models: id {card.get('id')!r}, "
        f"root {card.get('root')!r}, max_model_len {card.get('max_model_len')}): {why}"
    )
