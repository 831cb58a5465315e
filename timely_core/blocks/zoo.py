"""`BlockZoo`: a folder of content-addressed blocks and per-variant manifests.

    <root>/blocks/<sha256>.safetensors   one block's tensors, named by role
    <root>/files/<sha256>                any other file of a variant (config, tokenizer)
    <root>/variants/<name>.json          the variant's manifest

A block's address is the sha256 of its tensors' roles, dtypes, shapes and bytes, so
a block two variants hold alike is stored once. A tied output layer saved as an
equal copy of the embeddings (how our checkpoints save one) is the same content as
the embedding block and is stored once; a checkpoint with no `lm_head` tensor (tied
in config only) has no lm_head block and is reassembled without one.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from timely_core.blocks.manifest import NAME_PATTERN, BlockRef, TensorRef, VariantManifest
from timely_core.blocks.partition import (
    PartitionError,
    Place,
    block_order,
    checkpoint_place,
    lora_place,
)
from timely_core.blocks.tensor_file import (
    RawTensor,
    load_tensors,
    read_raw,
    save_tensors,
)

CHECKPOINT_WEIGHTS = "model.safetensors"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


class BlockZooError(ValueError):
    """Bad input to the zoo, named: a missing file, a shape that does not fit the
    base, an unknown variant."""


class UnknownVariant(BlockZooError):
    pass


@dataclass(frozen=True)
class AddResult:
    name: str
    blocks: int
    new_blocks: int
    new_bytes: int  # block file bytes written by this add


def block_hash(tensors: dict[str, RawTensor]) -> str:
    digest = hashlib.sha256()
    for role in sorted(tensors):
        raw = tensors[role]
        digest.update(f"{role}\0{raw.dtype}\0{list(raw.shape)}\0{len(raw.data)}\0".encode())
        digest.update(raw.data)
    return digest.hexdigest()


def write_atomic(path: Path, content: bytes) -> None:
    """Readers never see a half-written block, file or manifest."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(content)
    os.replace(temporary, path)


class BlockZoo:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.blocks_dir = root / "blocks"
        self.files_dir = root / "files"
        self.variants_dir = root / "variants"

    # -- reading -----------------------------------------------------------------
    def check_root(self) -> None:
        """Refuse a zoo path that is a file, which would otherwise list as an empty zoo
        and fail adds with a traceback."""
        if self.root.exists() and not self.root.is_dir():
            raise BlockZooError(f"zoo {self.root} is a file, not a folder")

    def variants(self) -> list[str]:
        if not self.variants_dir.is_dir():
            return []
        return sorted(p.stem for p in self.variants_dir.glob("*.json"))

    def manifest(self, name: str) -> VariantManifest:
        path = self.variants_dir / f"{name}.json"
        if not path.is_file():
            known = ", ".join(self.variants()) or "none"
            raise UnknownVariant(f"unknown variant {name!r} in zoo {self.root} (variants: {known})")
        try:
            return VariantManifest.model_validate_json(path.read_bytes())
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            reason = f"{where}: {first['msg']}" if where else first["msg"]
            raise BlockZooError(f"manifest {path} is damaged ({reason})") from error

    def block_path(self, digest: str) -> Path:
        return self.blocks_dir / f"{digest}.safetensors"

    def missing_blocks(self, manifest: VariantManifest) -> list[str]:
        """The digests of the variant's chain blocks whose files are gone, sorted."""
        return sorted(
            d for d in {r.hash for r in manifest.blocks} if not self.block_path(d).is_file()
        )

    def missing_files(self, manifest: VariantManifest) -> list[str]:
        """The names of the variant's other files whose stored copy is gone, sorted."""
        return sorted(f for f, d in manifest.files.items() if not (self.files_dir / d).is_file())

    def block_tensors(self, digest: str) -> dict[str, RawTensor]:
        path = self.block_path(digest)
        if not path.is_file():
            raise BlockZooError(f"block {digest} is missing from zoo {self.root}")
        tensors = load_tensors(path.read_bytes())
        if block_hash(tensors) != digest:
            raise BlockZooError(f"block {digest} in zoo {self.root} is corrupted (hash differs)")
        return tensors

    def variant_tensors(self, name: str) -> dict[str, RawTensor]:
        """Every weight tensor of the variant by its file name, through its chain (a
        shared block gives the base's tensors)."""
        manifest = self.manifest(name)
        hashes = {b.name: b.hash for b in manifest.blocks}
        blocks = {h: self.block_tensors(h) for h in set(hashes.values())}
        return {t: blocks[hashes[r.block]][r.role] for t, r in manifest.tensors.items()}

    # -- adding ------------------------------------------------------------------
    def add(self, name: str, folder: Path, base: str | None = None) -> AddResult:
        """A checkpoint folder (model.safetensors) or a peft LoRA adapter folder
        (adapter_config.json + adapter_model.safetensors; needs `base`)."""
        if not folder.is_dir():
            raise BlockZooError(f"{folder} is not a folder")
        if (folder / ADAPTER_CONFIG).is_file():
            if base is None:
                raise BlockZooError(
                    f"{folder} is a LoRA adapter: name the variant it adapts (base)"
                )
            return self._add(name, folder, ADAPTER_WEIGHTS, "lora", base)
        return self._add(name, folder, CHECKPOINT_WEIGHTS, "checkpoint", base)

    def _add(self, name: str, folder: Path, weights: str, kind: str, base: str | None) -> AddResult:
        if not re.match(NAME_PATTERN, name):
            raise BlockZooError(f"variant name {name!r}: a letter, then letters, digits, _ . -")
        if (self.variants_dir / f"{name}.json").exists():
            raise BlockZooError(f"variant {name!r} is already in zoo {self.root}")
        path = folder / weights
        if not path.is_file():
            sharded = sorted(p.name for p in folder.glob("*.safetensors.index.json"))
            hint = f" (sharded checkpoints, {sharded[0]}, are not supported)" if sharded else ""
            raise BlockZooError(f"{path} is missing{hint}")
        try:
            raw = read_raw(path)
        except ValueError as error:  # not safetensors: named by tensor_file
            raise BlockZooError(str(error)) from error
        base_manifest = self.manifest(base) if base is not None else None
        try:
            if kind == "lora":
                assert base_manifest is not None
                places = self._lora_places(raw.tensors, base_manifest)
            else:
                places = {t: checkpoint_place(t) for t in raw.tensors}
        except PartitionError as error:
            raise BlockZooError(f"{path}: {error}") from error
        grouped: dict[str, dict[str, RawTensor]] = defaultdict(dict)
        for tensor, place in places.items():
            grouped[place.block][place.role] = raw.tensors[tensor]
        if kind == "checkpoint" and base_manifest is not None:
            self._check_like_base(path, grouped, base_manifest)
        refs: list[BlockRef] = []
        new_blocks = new_bytes = 0
        for block in sorted(grouped, key=block_order):
            tensors = grouped[block]
            digest = block_hash(tensors)
            target = self.block_path(digest)
            if not target.exists():
                content = save_tensors(tensors, {"block": block})
                write_atomic(target, content)
                new_blocks, new_bytes = new_blocks + 1, new_bytes + len(content)
            refs.append(
                BlockRef(name=block, hash=digest, nbytes=sum(len(t.data) for t in tensors.values()))
            )
        files: dict[str, str] = {}
        for other in sorted(p for p in folder.iterdir() if p.is_file() and p.name != weights):
            content = other.read_bytes()
            digest = hashlib.sha256(content).hexdigest()
            if not (self.files_dir / digest).exists():
                write_atomic(self.files_dir / digest, content)
            files[other.name] = digest
        content = path.read_bytes()
        manifest = VariantManifest(
            name=name,
            kind=kind,  # type: ignore[arg-type]
            base=base,
            weights_file=weights,
            header=raw.header.hex(),
            weights_sha256=hashlib.sha256(content).hexdigest(),
            weights_bytes=len(content),
            blocks=refs,
            tensors={
                t: TensorRef(
                    block=p.block,
                    role=p.role,
                    dtype=raw.tensors[t].dtype,
                    shape=list(raw.tensors[t].shape),
                )
                for t, p in sorted(places.items())
            },
            files=files,
        )
        self._save(manifest)
        return AddResult(name, len(refs), new_blocks, new_bytes)

    def _lora_places(
        self, tensors: dict[str, RawTensor], base: VariantManifest
    ) -> dict[str, Place]:
        """Each factor's block, after checking it fits the base: A is [r, in], B is
        [out, r] for the base projection's [out, in]."""
        places: dict[str, Place] = {}
        for tensor, raw in tensors.items():
            target = lora_place(tensor)
            if target.base_tensor not in base.tensors:
                raise BlockZooError(
                    f"{tensor} adapts {target.base_tensor}, which base {base.name!r} does not have"
                )
            out, inp = base.tensors[target.base_tensor].shape
            if len(raw.shape) != 2 or (
                raw.shape[1] != inp if target.factor == "lora_A" else raw.shape[0] != out
            ):
                need = f"[r, {inp}]" if target.factor == "lora_A" else f"[{out}, r]"
                raise BlockZooError(
                    f"{tensor} is {list(raw.shape)}, base {base.name!r} needs {need} "
                    f"({target.base_tensor} is [{out}, {inp}])"
                )
            places[tensor] = target.place
        return places

    def _check_like_base(
        self, path: Path, grouped: dict[str, dict[str, RawTensor]], base: VariantManifest
    ) -> None:
        """A checkpoint added over a base must have the base's blocks and shapes."""
        mine = {
            (b, r): f"{t.dtype} {list(t.shape)}"
            for b, roles in grouped.items()
            for r, t in roles.items()
        }
        theirs = {(t.block, t.role): f"{t.dtype} {t.shape}" for t in base.tensors.values()}
        for key in sorted(mine.keys() | theirs.keys()):
            if mine.get(key) != theirs.get(key):
                raise BlockZooError(
                    f"{path}: block {key[0]} tensor {key[1]} is {mine.get(key) or 'missing'}, "
                    f"base {base.name!r} has {theirs.get(key) or 'none'}"
                )

    def _save(self, manifest: VariantManifest) -> None:
        write_atomic(
            self.variants_dir / f"{manifest.name}.json",
            (manifest.model_dump_json(indent=1) + "\n").encode(),
        )

    # -- sharing (logit-lens equivalence) ------------------------------------------
    def share(self, name: str, block: str, source: str) -> None:
        """Point `name`'s `block` at `source`'s block of the same name (its own block
        is kept, so `unshare` can revert)."""
        manifest, theirs = self.manifest(name), self.manifest(source).block(block)
        ref = manifest.block(block)
        mine = self.block_tensors(ref.replaced or ref.hash)
        other = self.block_tensors(theirs.hash)
        shapes = {r: (t.dtype, t.shape) for r, t in mine.items()}
        if shapes != {r: (t.dtype, t.shape) for r, t in other.items()}:
            raise BlockZooError(f"block {block}: {name!r} and {source!r} differ in shape")
        if ref.replaced is None:
            ref.replaced = ref.hash
        ref.hash = theirs.hash
        self._save(manifest)

    def unshare(self, name: str, block: str) -> None:
        manifest = self.manifest(name)
        ref = manifest.block(block)
        if ref.replaced is not None:
            ref.hash, ref.replaced = ref.replaced, None
            self._save(manifest)
