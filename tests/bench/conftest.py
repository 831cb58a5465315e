"""The benches' `main` sets torch's thread count for its own process; run in the test
process, that setting must not outlive the test (vLLM's CPU attention, in later tests
of the same process, checks the thread count it was built with)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _torch_threads_restored() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
