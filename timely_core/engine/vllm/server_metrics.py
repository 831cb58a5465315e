"""The vLLM servers' KV pools, read from their Prometheus /metrics: the
`MemoryReport` of `VllmServerEngine.memory` (server_engine.py), which caches it for
`metrics_period_s`."""

from __future__ import annotations

from typing import Any

from timely_core.engine.protocol import MemoryReport
from timely_core.engine.vllm.config import VLLM_CPU_BLOCK_SIZE
from timely_core.engine.vllm.server_router import Router


def kv_pools(router: Router, control: Any, httpx: Any) -> MemoryReport:
    """The answering servers' KV pools together (`control`: an httpx.Client); no
    host pool, nothing pinned. A server whose /metrics cannot be reached is marked
    down, so a hung one stalls the service's loop once, not on every refresh."""
    total = free = block_bytes = 0
    for server in router.up():
        try:
            text = control.get(f"{server.url}/metrics").text
            blocks, usage, pool_bytes = kv_metrics(text)
        except httpx.TransportError as exc:
            router.mark_down(server, f"/metrics failed: {exc!r}")
            continue
        except Exception:
            continue
        total += blocks
        free += round(blocks * (1.0 - usage))
        block_bytes = pool_bytes // max(1, blocks + 1)
    return MemoryReport(VLLM_CPU_BLOCK_SIZE, block_bytes, total, free, 0, 0, 0)


def kv_metrics(text: str) -> tuple[int, float, int]:
    """(KV blocks, fraction in use, pool bytes) from a vLLM server's Prometheus text."""
    blocks, usage, pool_bytes = 0, 0.0, 0
    for line in text.splitlines():
        if line.startswith("vllm:cache_config_info{"):
            blocks = int(_label(line, "num_gpu_blocks")) - 1  # block 0 is the null block
            pool_bytes = int(_label(line, "kv_cache_memory_bytes") or 0)
        elif line.startswith("vllm:kv_cache_usage_perc{"):
            usage = float(line.rsplit(" ", 1)[1])
    return blocks, usage, pool_bytes


def _label(line: str, name: str) -> str:
    """A Prometheus label's value ("" when absent or not a number)."""
    if f'{name}="' not in line:
        return ""
    value = line.split(f'{name}="', 1)[1].split('"', 1)[0]
    return value if value.isdigit() else ""
