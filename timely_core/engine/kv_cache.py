"""The KV tensors: one preallocated device pool and one host pool of blocks.

Layout [layers, 2 (k, v), blocks, block_size, kv_heads, head_dim], so a layer's
keys are one contiguous [slots, kv_heads, head_dim] view that the attention
indexes by flat slot (block * block_size + offset), and a swap of many blocks
over all layers is one indexed copy.
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
        shape = (num_layers, 2, num_device_blocks, block_size, num_kv_heads, head_dim)
        self.device = torch.zeros(shape, dtype=dtype)
        self.host = torch.zeros((*shape[:2], num_host_blocks, *shape[3:]), dtype=dtype)
        slots = num_device_blocks * block_size
        self.layer_views: list[tuple[torch.Tensor, torch.Tensor]] = [
            (
                self.device[i, 0].view(slots, num_kv_heads, head_dim),
                self.device[i, 1].view(slots, num_kv_heads, head_dim),
            )
            for i in range(num_layers)
        ]

    @staticmethod
    def bytes_per_block(
        num_layers: int, num_kv_heads: int, head_dim: int, block_size: int, dtype: torch.dtype
    ) -> int:
        element = torch.empty(0, dtype=dtype).element_size()
        return num_layers * 2 * block_size * num_kv_heads * head_dim * element

    def copy_device(self, src: list[int], dst: list[int]) -> None:
        """Copy device blocks src[i] -> dst[i] (copy-on-write of shared blocks)."""
        if src:
            self.device[:, :, dst] = self.device[:, :, src]

    def swap_out(self, device_blocks: list[int], host_blocks: list[int]) -> None:
        if device_blocks:
            self.host[:, :, host_blocks] = self.device[:, :, device_blocks]

    def swap_in(self, host_blocks: list[int], device_blocks: list[int]) -> None:
        if host_blocks:
            self.device[:, :, device_blocks] = self.host[:, :, host_blocks]
