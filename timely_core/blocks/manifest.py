"""A variant's manifest: its chain of blocks by content hash, how its weights file is
laid out, and its other files. Read with pydantic, so a damaged manifest is named."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$"


class BlockRef(BaseModel):
    """One block of the chain. `replaced` holds the variant's own block's hash while
    the chain points at the base's equivalent block instead (logit-lens sharing)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    hash: str
    nbytes: int
    replaced: str | None = None


class TensorRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    block: str
    role: str
    dtype: str
    shape: list[int]


class VariantManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    kind: Literal["checkpoint", "lora"]
    base: str | None = None  # the variant a LoRA adapter adapts
    weights_file: str  # model.safetensors or adapter_model.safetensors
    header: str  # the weights file's header (length prefix and JSON), hex
    weights_sha256: str  # of the weights file as added
    weights_bytes: int
    blocks: list[BlockRef]
    tensors: dict[str, TensorRef]
    files: dict[str, str]  # other file name -> content sha256

    def block(self, name: str) -> BlockRef:
        for ref in self.blocks:
            if ref.name == name:
                return ref
        raise KeyError(f"variant {self.name!r} has no block {name!r}")

    @property
    def shared_blocks(self) -> list[BlockRef]:
        return [b for b in self.blocks if b.replaced is not None]
