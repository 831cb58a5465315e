"""BlockManager bookkeeping on its own: sharing, copy-on-write, LRU reuse, swap."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
import torch

from timely_core.engine.block_manager import BlockManager
from timely_core.engine.protocol import OutOfKvMemory, SamplingParams
from timely_core.engine.sequence import KvLocation, Sequence
from timely_core.engine.torch.kv_cache import KvCache

SIZE = 4


def _manager(device: int = 8, host: int = 4) -> BlockManager:
    cache = KvCache(1, 1, 2, SIZE, device, host, torch.float32)
    return BlockManager(SIZE, device, host, cache)


def _block(manager: BlockManager, block: int) -> torch.Tensor:
    """The device KV of one block, all layers and heads."""
    assert isinstance(manager.cache, KvCache)
    return manager.cache.device[:, :, :, block * SIZE : (block + 1) * SIZE]


def _state(gen_id: int, tokens: Iterable[int]) -> Sequence:
    return Sequence(gen_id, ids := list(tokens), len(ids), SamplingParams(), gen_id)


def _computed(manager: BlockManager, state: Sequence) -> None:
    state.num_computed = len(state.token_ids)
    manager.register_full_blocks(state)


def test_engine_blocks_shared_by_content_and_reused_after_free() -> None:
    manager = _manager()
    a = _state(0, range(10))  # 3 blocks, 2 full
    manager.admit(a, None)
    _computed(manager, a)
    b = _state(1, range(10))
    manager.admit(b, None)
    assert b.block_table[:2] == a.block_table[:2] and b.num_computed == 8
    assert manager.ref_counts[a.block_table[0]] == 2
    manager.free(a)
    manager.free(b)
    assert manager.num_free_device == 8
    c = _state(2, range(9))
    manager.admit(c, None)  # freed blocks keep their content until reallocated
    assert c.num_computed == 8


def test_engine_writing_into_a_shared_block_copies_it() -> None:
    manager = _manager()
    prefix_state = _state(-1, range(6))
    manager.admit(prefix_state, None, compute_all=True)
    _block(manager, prefix_state.block_table[1]).fill_(7.0)
    _computed(manager, prefix_state)
    prefix = manager.pin("p", prefix_state)
    g = _state(0, [*range(6), 50, 51])
    manager.admit(g, prefix)
    assert g.block_table[0] == prefix.blocks[0]
    assert g.block_table[1] != prefix.blocks[1]
    assert torch.all(_block(manager, g.block_table[1]) == 7.0)
    assert manager.ref_counts[prefix.blocks[1]] == 1 and g.num_computed == 6


def test_engine_swap_out_keeps_shared_blocks_and_restores_content() -> None:
    manager = _manager(device=8, host=4)
    a = _state(0, range(12))
    manager.admit(a, None)
    _block(manager, a.block_table[2]).fill_(3.0)
    _computed(manager, a)
    b = _state(1, [*range(8), 99, 98])
    manager.admit(b, None)
    freed = a.block_table[2]
    assert manager.swap_out(a)
    assert a.kv is KvLocation.HOST and sorted(a.host_blocks) == [2]
    assert manager.num_free_host == 3
    _block(manager, freed).zero_()  # as if another generation reused it
    manager.swap_in(a)
    assert torch.all(_block(manager, a.block_table[2]) == 3.0)
    assert manager.num_free_host == 4


def test_engine_admission_is_all_or_nothing() -> None:
    manager = _manager(device=3)
    with pytest.raises(OutOfKvMemory, match="needs 4 free KV blocks"):
        manager.admit(_state(0, range(13)), None)
    assert manager.num_free_device == 3 and manager.ref_counts == [0, 0, 0]


@pytest.mark.parametrize(
    ("src", "dst"), [([1, 2, 3], [5, 6, 7]), ([3, 1, 2], [7, 5, 6]), ([4], [0])]
)
def test_engine_block_copies_move_whole_blocks_over_all_layers(
    src: list[int], dst: list[int]
) -> None:
    cache = KvCache(2, 2, 3, SIZE, 8, 8, torch.float32)
    cache.device.copy_(torch.randn_like(cache.device))
    before = cache.device.clone()
    cache.swap_out(src, dst)
    cache.copy_device(src, dst)
    for s, d in zip(src, dst, strict=True):
        expected = before[:, :, :, s * SIZE : (s + 1) * SIZE]
        assert torch.equal(cache.host[:, :, :, d * SIZE : (d + 1) * SIZE], expected)
        assert torch.equal(cache.device[:, :, :, d * SIZE : (d + 1) * SIZE], expected)
    untouched = [b for b in range(8) if b not in dst]
    for b in untouched:
        block = slice(b * SIZE, (b + 1) * SIZE)
        assert torch.equal(cache.device[:, :, :, block], before[:, :, :, block])
