"""What a bench records about the machine it ran on, so that its figures are read
against it (they move between machines): CPU, cores, torch threads, the load
average before and after, and the measured single-thread float32 matmul peak; and
the decode-iteration timing the engine benches share."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

import torch

from timely_core.engine.protocol import Engine


def matmul_gflops(size: int = 1024, repeats: int = 5) -> float:
    """Best float32 GFLOP/s of a square matmul on the current thread count."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best / 1e9


def gpu_matmul_tflops(device: str = "cuda", size: int = 8192) -> float:
    """bfloat16 TFLOP/s of a square matmul on the GPU: the mean of 10 after 3 warm-ups."""
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
    return 10 * 2 * size**3 / (time.perf_counter() - started) / 1e12


class MachineRecord:
    """Started before a bench's work (load average, matmul peak); `done()` after it."""

    def __init__(self) -> None:
        self.load_before = os.getloadavg()[0]
        self.matmul_gflops = matmul_gflops()

    def done(self) -> dict[str, Any]:
        return {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "matmul_gflops": self.matmul_gflops,
            "load_before": self.load_before,
            "load_after": os.getloadavg()[0],
        }

    def done_with_platform(self) -> dict[str, Any]:
        """`done()` under the keys the natural-set benches write (`platform`, `cpus`)."""
        return {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "matmul_gflops": self.matmul_gflops,
            "load_before": self.load_before,
            "load_after": os.getloadavg()[0],
        }

    @staticmethod
    def line(machine: dict[str, Any]) -> str:
        return (
            f"load {machine['load_before']:.1f} -> {machine['load_after']:.1f} on "
            f"{machine['cores']} cores; matmul {machine['matmul_gflops']:.0f} GFLOP/s "
            f"({machine['torch_threads']} thread(s))"
        )


def decode_step_times(
    engine: Engine, ids: list[int], steps: int, finished: set[int]
) -> list[float]:
    """Seconds of each of up to `steps` decode iterations of the whole batch `ids`,
    until one ends a generation (`finished`: those already ended, none to time);
    the generations still running are then aborted."""
    times: list[float] = []
    while not finished and len(times) < steps:
        started = time.perf_counter()
        outputs = engine.step(ids)
        times.append(time.perf_counter() - started)
        finished = {o.gen_id for o in outputs if o.finished}
    for gen_id in ids:
        if gen_id not in finished:
            engine.abort(gen_id)
    return times
