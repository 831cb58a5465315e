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
        # per layer: [2, kv_heads, slots, d] (written in one copy), and its k and v
        self.layer_views: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = [
            (layer, layer[0], layer[1]) for layer in self.device
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

    def _copy(
        self, dst: torch.Tensor, dst_blocks: list[int], src: torch.Tensor, src_blocks: list[int]
    ) -> None:
        """Copy blocks between pools (or within one): a plain slice copy when both
        sides are runs of consecutive blocks (usual: blocks are handed out in order),
        else one gather and one scatter over all layers at once."""
        rows = dst.shape[0] * dst.shape[1] * dst.shape[2]
        dst_rows = dst.view(rows, -1, dst.shape[-1])
        src_rows = src.view(rows, -1, src.shape[-1])
        size = self.block_size
        if _is_run(dst_blocks) and _is_run(src_blocks):
            d0, s0, length = dst_blocks[0] * size, src_blocks[0] * size, len(src_blocks) * size
            dst_rows[:, d0 : d0 + length].copy_(src_rows[:, s0 : s0 + length])
            return
        dst_rows.index_copy_(1, self._slots(dst_blocks), src_rows[:, self._slots(src_blocks)])

    def copy_device(self, src: list[int], dst: list[int]) -> None:
        """Copy device blocks src[i] -> dst[i] (copy-on-write of shared blocks)."""
        if src:
            self._copy(self.device, dst, self.device, src)

    def swap_out(self, device_blocks: list[int], host_blocks: list[int]) -> None:
        if device_blocks:
            self._copy(self.host, host_blocks, self.device, device_blocks)

    def swap_in(self, host_blocks: list[int], device_blocks: list[int]) -> None:
        if host_blocks:
            self._copy(self.device, device_blocks, self.host, host_blocks)


def _is_run(blocks: list[int]) -> bool:
    """Whether `blocks` are consecutive ascending block ids."""
    first = blocks[0]
    return blocks[-1] - first == len(blocks) - 1 and blocks == list(
        range(first, first + len(blocks))
    )
