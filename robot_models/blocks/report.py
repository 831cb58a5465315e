"""What the zoo saves: bytes stored against the sum of the checkpoints added, and
which of a variant's blocks or files are gone from the zoo (an export would fail)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from timely_core.blocks.zoo import BlockZoo


@dataclass(frozen=True)
class VariantReport:
    name: str
    kind: str
    base: str | None
    blocks: int
    shared_blocks: int  # pointed at the base's block by the logit-lens test
    checkpoint_bytes: int  # its weights file and other files, as added
    own_bytes: int  # tensor bytes of chain blocks no other variant's chain holds
    missing: tuple[str, ...] = ()  # its blocks ("block HASH") and files absent from the zoo


@dataclass(frozen=True)
class ZooReport:
    variants: list[VariantReport]
    checkpoints_bytes: int  # sum over variants of checkpoint_bytes
    stored_bytes: int  # every file under the zoo (blocks, files, manifests)
    resident_bytes: int  # tensor bytes of the distinct blocks all chains use

    @property
    def ratio(self) -> float:
        return self.stored_bytes / max(1, self.checkpoints_bytes)

    @property
    def incomplete(self) -> list[VariantReport]:
        return [v for v in self.variants if v.missing]


def _folder_bytes(zoo: BlockZoo) -> int:
    if not zoo.root.is_dir():
        return 0
    return sum(p.stat().st_size for p in zoo.root.rglob("*") if p.is_file())


def zoo_report(zoo: BlockZoo) -> ZooReport:
    manifests = [zoo.manifest(n) for n in zoo.variants()]
    users: Counter[str] = Counter()
    sizes: dict[str, int] = {}
    for manifest in manifests:
        for ref in manifest.blocks:
            users[ref.hash] += 1
            sizes[ref.hash] = ref.nbytes
    rows = []
    for m in manifests:
        files = [zoo.files_dir / digest for digest in m.files.values()]
        file_bytes = sum(path.stat().st_size for path in files if path.is_file())
        own = sum(r.nbytes for r in {r.hash: r for r in m.blocks}.values() if users[r.hash] == 1)
        missing = [f"block {digest}" for digest in zoo.missing_blocks(m)]
        missing += [f"file {name}" for name in zoo.missing_files(m)]
        rows.append(
            VariantReport(
                m.name,
                m.kind,
                m.base,
                len(m.blocks),
                len(m.shared_blocks),
                m.weights_bytes + file_bytes,
                own,
                tuple(missing),
            )
        )
    return ZooReport(
        rows,
        sum(r.checkpoint_bytes for r in rows),
        _folder_bytes(zoo),
        sum(sizes.values()),
    )
