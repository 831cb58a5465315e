"""Writing the commands' output files: where they go is checked before the work (a
bad path fails at once with one line, not after a long replay or measurement), and
each file is written atomically, leaving no temporary file behind when that fails.

An output is also refused when it is the same file as one of the command's inputs
(`replay s.lrt -o s.lrt` would replace the trace it replays) or as another of its
outputs (one write would replace the other), compared as files, not as spellings.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from lrtrace.errors import LrtraceError

Named = tuple[str, Path | None]
"""A file of a command and how a message calls it (`-o`, `the trace`); None: there
is no such file this time (an optional flag not given, stdin)."""


def output_path(text: str) -> Path:
    """argparse type of a file to write: a path that ends in a separator names a
    directory, and `Path` would silently drop the separator and write a file there."""
    if text.endswith(("/", os.sep)):
        raise LrtraceError(f"cannot write to {text}: it names a directory; give a file name")
    return Path(text)


def same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` are one file: the same inode when both exist (links and
    other spellings included), else the same absolute path once resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one is not there (yet): where would it be?
        return a.resolve() == b.resolve()


def check_distinct(outputs: Sequence[Named], inputs: Sequence[Named] = ()) -> None:
    """Refuse an output that is the same file as an input (writing it destroys what the
    command reads) or as an earlier output (the second write replaces the first)."""
    for i, (name, path) in enumerate(outputs):
        if path is None:
            continue
        for what, source in inputs:
            if source is not None and same_file(path, source):
                raise LrtraceError(
                    f"{name} {path} is {what} this command reads: writing it would destroy "
                    "the input; choose another output"
                )
        for other, earlier in outputs[:i]:
            if earlier is not None and same_file(path, earlier):
                raise LrtraceError(
                    f"{name} {path} is the same file as {other} {earlier}: one output "
                    "would replace the other"
                )


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
