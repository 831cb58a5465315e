"""A plugin process's stderr, passed on to the service's stderr line by line (a
plugin's own logging stays visible) with the last lines kept, so that a process
that dies says why: a start failure or a crash quotes what it printed last."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import deque
from typing import IO

KEPT_LINES = 12


class StderrTail:
    def __init__(self, stream: IO[bytes], name: str) -> None:
        self._lines: deque[str] = deque(maxlen=KEPT_LINES)
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._copy, args=(stream,), name=f"{name}-stderr", daemon=True
        )
        self._thread.start()

    def _copy(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                with self._lock:
                    self._lines.append(line)
                with contextlib.suppress(OSError, ValueError):  # its stderr gone: drain on
                    sys.stderr.write(line + "\n")

    def text(self, wait_s: float = 1.0) -> str:
        """The last lines, once the stream has ended (a dead process's last words
        may still be in the pipe) or after `wait_s`."""
        self._thread.join(wait_s)
        with self._lock:
            return " | ".join(line.strip() for line in self._lines if line.strip())
