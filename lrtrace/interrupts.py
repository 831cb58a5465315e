"""Ctrl-C: a command ends with one line and exit status 130 (the shell's for SIGINT),
never a traceback; one with work done so far (`replay`'s runs, `capacity`'s fleet
sizes) writes that work first and says where, so minutes of replays are not lost."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from rich.console import Console

EXIT_INTERRUPTED: Final = 130


def say_interrupted(console: Console, wrote: str, out: Path | None) -> None:
    """`interrupted: wrote <what> so far to <out>` (no `to` when nothing was written)."""
    console.print(f"[red]interrupted[/]: wrote {wrote} so far" + (f" to {out}" if out else ""))
