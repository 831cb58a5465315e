"""Where the `service` target loads the fleet variants a trace's agents name: a
folder holding one variant folder per name (default: the shipped variants), or a
block zoo (which then also holds the base model)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lrtrace.errors import LrtraceError


def _shipped() -> Path:
    from robot_models.variants.spec import VARIANTS_DIR

    return VARIANTS_DIR


@dataclass(frozen=True)
class VariantSource:
    folders: Path = field(default_factory=_shipped)
    zoo: Path | None = None
    zoo_base: str = "base"

    def folder(self, name: str) -> Path:
        """The variant's folder (a peft LoRA adapter or a full fine-tune checkpoint)."""
        folder = self.folders / name
        if not folder.is_dir():
            raise LrtraceError(
                f"variant {name!r} of the trace's agents: no folder {folder} (--variants-dir "
                f"{self.folders} holds {self._held()})"
            )
        return folder

    def _held(self) -> str:
        """The variant folders there (an adapter or a checkpoint), a few named."""
        if not self.folders.is_dir():
            return "nothing: it is not a folder"
        names = sorted(
            p.name
            for p in self.folders.iterdir()
            if (p / "adapter_config.json").is_file() or (p / "config.json").is_file()
        )
        if not names:
            return "no variant folders"
        more = f" and {len(names) - 8} more" if len(names) > 8 else ""
        return ", ".join(names[:8]) + more
