"""A model read from a block zoo (timely_core/blocks, BlockLLM) instead of a folder:
its config and tokenizer are the zoo's stored copies of its files, its tensors are
read block by block, each checked against its content hash. The engine serves the
zoo's checkpoint variant as its base and loads other variants of the same zoo beside
it (zoo_variants.py), comparing blocks by hash rather than by value."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

from timely_core.blocks.manifest import VariantManifest
from timely_core.blocks.tensor_file import to_torch
from timely_core.blocks.zoo import BlockZoo, BlockZooError
from timely_core.engine.torch.loader import CheckpointError, build_weights, read_model_config
from timely_core.engine.torch.model.llama import LlamaModel


@dataclass(frozen=True)
class ZooModel:
    """One variant of a zoo, checked complete (every block and file present)."""

    zoo: BlockZoo
    name: str
    manifest: VariantManifest

    @staticmethod
    def open(root: str | Path, name: str) -> ZooModel:
        """The zoo at `root`'s variant `name`; CheckpointError naming what is missing."""
        zoo = BlockZoo(Path(root))
        if not zoo.root.is_dir():
            raise CheckpointError(f"block zoo {root} is not a folder")
        return ZooModel.of(zoo, name, CheckpointError)

    @staticmethod
    def of(zoo: BlockZoo, name: str, error: type[ValueError]) -> ZooModel:
        """As `open`, on an open zoo; what is wrong raised as `error`."""
        try:
            manifest = zoo.manifest(name)
        except BlockZooError as err:
            raise error(str(err)) from None
        missing = zoo.missing_blocks(manifest) or zoo.missing_files(manifest)
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise error(f"zoo {zoo.root} variant {name!r} lacks {missing[0]}{more}")
        return ZooModel(zoo, name, manifest)

    def check_servable(self) -> None:
        """A base model is a checkpoint variant, not a LoRA adapter (CheckpointError)."""
        if self.manifest.kind != "checkpoint":
            raise CheckpointError(
                f"{self.label} is a {self.manifest.kind} adapter of {self.manifest.base!r}: "
                "serve a checkpoint variant and load the adapter beside it"
            )

    @property
    def source(self) -> Path:
        """Its manifest, which names where it came from in reports."""
        return self.zoo.variants_dir / f"{self.name}.json"

    @property
    def label(self) -> str:
        return f"zoo {self.zoo.root} variant {self.name!r}"

    def file(self, file_name: str) -> Path | None:
        """The stored copy of one of its files (config.json, tokenizer.json, ...)."""
        digest = self.manifest.files.get(file_name)
        return None if digest is None else self.zoo.files_dir / digest

    def required_file(self, file_name: str) -> Path:
        """`file`, or CheckpointError naming the variant whose zoo lacks it."""
        found = self.file(file_name)
        if found is None:
            raise CheckpointError(f"{self.label}: the zoo holds no {file_name} for it")
        return found

    def block_hashes(self) -> dict[str, str]:
        """Block name -> the content hash its chain points at (a block shared by the
        logit-lens test points at the base's)."""
        return {b.name: b.hash for b in self.manifest.blocks}

    def tensors(self, blocks: Iterable[str] | None = None) -> dict[str, torch.Tensor]:
        """Its tensors by their file names (HF's or peft's), from `blocks` only (every
        block by default); a block whose content no longer matches its hash is refused."""
        hashes = self.block_hashes()
        wanted = set(hashes) if blocks is None else set(blocks)
        read = {}
        for block in wanted:
            try:
                read[block] = self.zoo.block_tensors(hashes[block])
            except BlockZooError as err:
                raise CheckpointError(f"{self.label}: {err}") from None
        return {
            name: to_torch(read[ref.block][ref.role])
            for name, ref in self.manifest.tensors.items()
            if ref.block in wanted
        }


def load_zoo_model(model: ZooModel, dtype: torch.dtype) -> LlamaModel:
    """Build the engine's model from a zoo checkpoint variant (not a LoRA adapter)."""
    model.check_servable()
    cfg = read_model_config(model.required_file("config.json"), f"{model.label} config.json")
    return LlamaModel(cfg, build_weights(model.tensors(), cfg, dtype, model.source), dtype)
