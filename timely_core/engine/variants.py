"""Fleet variants of one base model served by one engine (BlockLLM, S-LoRA): what an
engine that serves them offers the service, and its report of resident weights.

An engine serves variants when it implements `VariantEngine`: its generations and
registered prefixes name the variant they run with (None: the base model), and it
reports the weights it holds (the torch engine, and vLLM in process or its servers
through vLLM's multi-LoRA). Engines without it (the simulator) serve the base only,
and the service refuses a robot that names a variant on them rather than plan with
the base model in its place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from timely_core.engine.protocol import SamplingParams

BASE_VARIANT = "base"  # how weight reports name the base model; no adapter may take it


@dataclass(frozen=True)
class ResidentVariant:
    """One variant's own weights: a LoRA adapter holds only its factors, a full
    fine-tune only the blocks where it differs from the base (BlockLLM)."""

    name: str
    # "lora": low-rank factors applied over the shared base weights; "blocks": a full
    # fine-tune's own blocks, the others shared with the base
    kind: str
    nbytes: int
    source: str  # where it was loaded from (an adapter or checkpoint folder)
    blocks: tuple[str, ...] = ()  # kind "blocks": its own blocks (embedding, layers.3.ffn, ...)
    # its KV is the base's (nothing it changes feeds a k/v projection), so cached and
    # registered prefix blocks are shared with the base (torch engine)
    base_kv: bool = False


@dataclass(frozen=True)
class ResidentWeights:
    """Model weights an engine holds: the base model once, and each variant's own
    bytes on top (KV memory is `Engine.memory()`)."""

    base_bytes: int
    variants: tuple[ResidentVariant, ...] = ()

    @property
    def variant_bytes(self) -> int:
        return sum(v.nbytes for v in self.variants)

    @property
    def total_bytes(self) -> int:
        return self.base_bytes + self.variant_bytes

    def names(self) -> list[str]:
        return [v.name for v in self.variants]


@runtime_checkable
class VariantEngine(Protocol):
    """An `Engine` that serves fleet variants of its base model in mixed batches."""

    def resident_weights(self) -> ResidentWeights:
        """The base model's bytes and each loaded variant's (its kind and bytes)."""

    def register_prefix(
        self, prefix_id: str, token_ids: list[int], variant: str | None = None
    ) -> None:
        """As `Engine.register_prefix`, holding `variant`'s KV (a LoRA changes it)."""

    def add(
        self,
        gen_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prefix_id: str | None = None,
        variant: str | None = None,
    ) -> None:
        """As `Engine.add`, run with `variant` (None: the base model)."""
