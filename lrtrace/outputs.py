"""Writing the commands' output files: where they go is checked before the work (a
bad path fails at once with one line, not after a long replay or measurement), and
each file is written atomically, leaving no temporary file behind when that fails."""

from __future__ import annotations

import os
from pathlib import Path

from lrtrace.errors import LrtraceError


def check_file(path: Path, what: str) -> None:
    """Refuse `path` (a file to write; `what` names it in the message) if it is a
    directory, or its directory is missing, not a directory, or not writable. A
    missing directory is refused, not created: a typo must not make directories."""
    if path.is_dir():
        raise LrtraceError(f"cannot write {what} {path}: it is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise LrtraceError(f"cannot write {what} {path}: no directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise LrtraceError(f"cannot write {what} {path}: directory {parent} is not writable")


def write_atomically(path: Path, data: bytes, what: str) -> None:
    """Write through `<path>.tmp` and rename, so an interrupted write (Ctrl-C
    included) leaves the previous file intact; the temporary file is removed when
    the write fails."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as err:
        _remove_quietly(tmp)
        raise LrtraceError(f"cannot write {what} {path}: {err.strerror}") from None
    except BaseException:
        _remove_quietly(tmp)
        raise


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:  # best effort (not ours to remove if a directory): the write's error matters
        return
