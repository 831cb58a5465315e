"""Training's process-wide torch settings are set for the run and restored after."""

from __future__ import annotations

import torch

from robot_models.training.threads import flushed_denormals, torch_threads

DENORMAL = 1e-42  # below float32's smallest normal (about 1.2e-38)


def test_denormals_are_flushed_only_inside_the_context() -> None:
    assert torch.tensor([DENORMAL], dtype=torch.float32).item() != 0.0
    with flushed_denormals():
        assert torch.tensor([DENORMAL], dtype=torch.float32).item() == 0.0
        small = torch.tensor([1e-20], dtype=torch.float32)  # squared: 1e-40, denormal
        assert (small * small).item() == 0.0  # results too, not only literals
    assert torch.tensor([DENORMAL], dtype=torch.float32).item() != 0.0
    small = torch.tensor([1e-20], dtype=torch.float32)
    assert (small * small).item() != 0.0


def test_thread_count_is_restored() -> None:
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
