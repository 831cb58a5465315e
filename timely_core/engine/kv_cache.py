"""The KV tensors: one preallocated device pool and one host pool of blocks.

Layout [layers, 2 (k, v), kv_heads, slots, head_dim] with slot = block *
block_size + offset. Head-major, so a gathered context is already [kv_heads,
tokens, head_dim] as attention wants it (no transposing copy per layer per step),
and a swap of many blocks over all layers is one indexed copy.
"""

from __future__ import annotations

import torch


class KvCache:
    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        block_size: int,
        num_device_blocks: int,
        num_host_blocks: int,
        dtype: torch.dtype,
    ) -> None:
        self.block_size = block_size
        self._offsets = torch.arange(block_size)
        self.device = torch.zeros(
            (num_layers, 2, num_kv_heads, num_device_blocks * block_size, head_dim), dtype=dtype
        )
        self.host = torch.zeros(
            (num_layers, 2, num_kv_heads, num_host_blocks * block_size, head_dim), dtype=dtype
        )
        self.layer_views: list[tuple[torch.Tensor, torch.Tensor]] = [
            (self.device[i, 0], self.device[i, 1]) for i in range(num_layers)
        ]

    @staticmethod
    def bytes_per_block(
        num_layers: int, num_kv_heads: int, head_dim: int, block_size: int, dtype: torch.dtype
    ) -> int:
        element = torch.empty(0, dtype=dtype).element_size()
        return num_layers * 2 * block_size * num_kv_heads * head_dim * element

    def _slots(self, blocks: list[int]) -> torch.Tensor:
        ids = torch.tensor(blocks, dtype=torch.long)
        return (ids[:, None] * self.block_size + self._offsets).view(-1)

    def copy_device(self, src: list[int], dst: list[int]) -> None:
        """Copy device blocks src[i] -> dst[i] (copy-on-write of shared blocks)."""
        if src:
            self.device[:, :, :, self._slots(dst)] = self.device[:, :, :, self._slots(src)]

    def swap_out(self, device_blocks: list[int], host_blocks: list[int]) -> None:
        if device_blocks:
            source = self.device.index_select(3, self._slots(device_blocks))
            self.host.index_copy_(3, self._slots(host_blocks), source)

    def swap_in(self, host_blocks: list[int], device_blocks: list[int]) -> None:
        if host_blocks:
            source = self.host.index_select(3, self._slots(host_blocks))
            self.device.index_copy_(3, self._slots(device_blocks), source)
