"""The flat batch `ModelRunner.run` hands the model: row order, slots, logits rows and
which chunks sample, checked against a model stub that records its inputs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import torch

from timely_core.engine.iteration_scheduler import Chunk
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.sequence import Sequence
from timely_core.engine.torch.kv_cache import KvCache
from timely_core.engine.torch.model.attention import AttentionBatch
from timely_core.engine.torch.model.llama import LlamaModel
from timely_core.engine.torch.model_runner import ModelRunner

SIZE = 4


class _Recorder:
    def __init__(self) -> None:
        self.config = SimpleNamespace(num_attention_heads=4, num_key_value_heads=2)
        self.dtype = torch.float32
        self.calls: list[tuple[Any, ...]] = []

    def forward(self, *args: Any) -> torch.Tensor:
        self.calls.append(args)
        return torch.zeros(1)


def _runner(cascade: bool) -> tuple[ModelRunner, _Recorder]:
    model = _Recorder()
    cache = SimpleNamespace(device=SimpleNamespace(device=torch.device("cpu")), layer_views=[])
    runner = ModelRunner(cast(LlamaModel, model), cast(KvCache, cache), SIZE)
    runner._cascade = cascade
    return runner, model


def _chunk(gen: int, tokens: int, table: list[int], start: int, length: int) -> Chunk:
    ids = [100 * gen + i for i in range(tokens)]
    return Chunk(
        Sequence(gen, ids, tokens, SamplingParams(), gen, block_table=table), start, length
    )


def _iteration() -> dict[str, Chunk]:
    return {
        "cold": _chunk(0, 6, [9, 10], 0, 4),  # a prompt's first chunk: does not sample
        "a": _chunk(1, 11, [0, 1, 5], 8, 3),  # a and b open with blocks 0, 1
        "decode": _chunk(2, 10, [20, 21, 22], 9, 1),
        "plain": _chunk(3, 5, [12, 13], 0, 5),
        "b": _chunk(4, 10, [0, 1, 7], 8, 2),
    }


def _rows(chunks: list[Chunk]) -> tuple[list[int], list[int]]:
    ids = [i for c in chunks for i in c.state.token_ids[c.start : c.start + c.length]]
    return ids, [p for c in chunks for p in range(c.start, c.start + c.length)]


def test_rows_are_decodes_then_cascade_members_then_other_prefills() -> None:
    runner, model = _runner(cascade=True)
    c = _iteration()
    sampled, _ = runner.run(list(c.values()))
    ids, positions, max_position, batch, _, logits_rows = model.calls[0]
    assert isinstance(batch, AttentionBatch)
    order = [c["decode"], c["a"], c["b"], c["cold"], c["plain"]]
    assert (ids.tolist(), positions.tolist()) == _rows(order)
    assert batch.slot_mapping.tolist() == [89, 20, 21, 22, 28, 29, *range(36, 40), *range(48, 53)]
    assert max_position == 10
    assert sampled == [c["decode"], c["a"], c["b"], c["plain"]]
    assert logits_rows.tolist() == [0, 3, 5, 14]
    assert batch.decode is not None and batch.decode.size == 1
    (shared,) = batch.shared
    assert (shared.start, shared.end, shared.shared_start) == (1, 6, 0)
    assert shared.shared_slots.tolist() == list(range(8))
    assert [(s.start, s.length) for s in shared.spans] == [(1, 3), (4, 2)]
    assert [(s.start, s.length) for s in batch.spans] == [(6, 4), (10, 5)]


def test_without_the_cascade_prefills_keep_their_order() -> None:
    runner, model = _runner(cascade=False)
    c = _iteration()
    sampled, _ = runner.run(list(c.values()))
    ids, positions, _, batch, _, logits_rows = model.calls[0]
    order = [c["decode"], c["cold"], c["a"], c["plain"], c["b"]]
    assert (ids.tolist(), positions.tolist()) == _rows(order)
    assert batch.shared == () and [s.start for s in batch.spans] == [1, 5, 8, 13]
    assert sampled == [c["decode"], c["a"], c["plain"], c["b"]]
    assert logits_rows.tolist() == [0, 7, 12, 14]


def test_decodes_only_take_the_same_inputs_without_logits_selection() -> None:
    decodes = [_chunk(2, 10, [20, 21, 22], 9, 1), _chunk(5, 6, [3, 4], 5, 1)]
    runner, model = _runner(cascade=True)
    assert runner.run(decodes)[0] == decodes
    ids, positions, max_position, batch, _, logits_rows = model.calls[0]
    assert (ids.tolist(), positions.tolist(), max_position) == ([209, 505], [9, 5], 9)
    assert batch.slot_mapping.tolist() == [89, 17] and logits_rows is None
    mixed, recorded = _runner(cascade=True)
    mixed.run([*decodes, _chunk(6, 3, [30], 0, 3)])
    assert recorded.calls[0][0].tolist()[:2] == [209, 505]
    assert recorded.calls[0][3].slot_mapping.tolist()[:2] == [89, 17]
