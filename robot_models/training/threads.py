"""Training on a set number of torch threads, restoring the caller's afterwards:
the count is process-wide, and a process that trains, then serves (a test run, a
notebook) must not be left on another count (vLLM's CPU attention checks that its
kernels run on the count it planned for)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextmanager
def flushed_denormals() -> Iterator[None]:
    """Denormal floats flushed to zero while training, then back to torch's default.

    Late in training, attention over the long prefix yields many denormal values
    (tiny softmax weights and their gradients), which x86 CPUs compute far more
    slowly; the loss does not depend on them (docs/planner-data-rework.md has the
    measured step times)."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
