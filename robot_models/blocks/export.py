"""Export a zoo variant as an ordinary folder (a checkpoint or a peft adapter), for
tools that read folders: HF, peft, vLLM and the variant's scoring."""

from __future__ import annotations

import hashlib
from pathlib import Path

from robot_models.training.options import OptionError, check_output_dir
from timely_core.blocks.tensor_file import assemble
from timely_core.blocks.zoo import BlockZoo, BlockZooError, write_atomic


def export_variant(zoo: BlockZoo, name: str, out: Path) -> Path:
    """Write the variant's folder; without shared blocks its weights file is
    bit-identical to the one added (checked)."""
    manifest = zoo.manifest(name)
    _check_export_target(zoo, out)
    missing = zoo.missing_files(manifest)
    if missing:
        raise BlockZooError(f"file {missing[0]} of {name!r} is missing from the zoo")
    content = assemble(bytes.fromhex(manifest.header), zoo.variant_tensors(name))
    if (
        not manifest.shared_blocks
        and hashlib.sha256(content).hexdigest() != manifest.weights_sha256
    ):
        raise BlockZooError(f"variant {name!r} reassembles to other bytes than it was added with")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / manifest.weights_file, content)
    for file_name, digest in manifest.files.items():
        write_atomic(out / file_name, (zoo.files_dir / digest).read_bytes())
    return out


def _check_export_target(zoo: BlockZoo, out: Path) -> None:
    """An export writes a new folder: never into the zoo (its files would mix with
    the blocks), over a file, or over a folder's files (a half-mixed checkpoint)."""
    root = zoo.root.resolve()
    target = out.resolve()
    if target == root or root in target.parents:
        raise BlockZooError(f"export folder {out} is inside zoo {zoo.root}")
    try:
        check_output_dir(out, "out")
    except OptionError as error:
        raise BlockZooError(f"export folder {error.reason}") from error
    if out.is_dir() and any(out.iterdir()):
        raise BlockZooError(f"export folder {out} exists and is not empty")
