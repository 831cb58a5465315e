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
