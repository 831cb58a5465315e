"""Full fine-tunes served as block variants (BlockLLM): a variant given as a whole HF
checkpoint is compared with the base model block by block, and holds only the blocks
that differ; every other block is the base's own tensors, held once.

Blocks are the architectural units timely_core/blocks/partition.py names (the block
zoo's): `embedding`, per layer
`layers.<i>.input_norm`, `layers.<i>.attention` (q/k/v/o), `layers.<i>.post_attention_norm`,
`layers.<i>.ffn` (gate/up/down), then `norm` and `lm_head`. Blocks are compared in the
engine's dtype, the precision the engine computes in: a block equal there runs the
same for the variant as for the base. A variant read from a block zoo is compared by
content hash instead (zoo_variants.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from timely_core.engine.protocol import AdapterError
from timely_core.engine.torch.loader import CheckpointError, build_layer, load_model_config
from timely_core.engine.torch.model.config import ModelConfig
from timely_core.engine.torch.model.llama import LayerWeights, ModelWeights
from timely_core.engine.variants import BASE_VARIANT

LAYER_BLOCKS: dict[str, tuple[str, ...]] = {  # block unit -> its LayerWeights fields
    "input_norm": ("input_norm",),
    "attention": ("qkv", "qkv_bias", "o", "o_bias"),
    "post_attention_norm": ("post_norm",),
    "ffn": ("gate_up", "gate_up_bias", "down", "down_bias"),
}
TOP_BLOCKS: dict[str, str] = {"embedding": "embed", "norm": "norm", "lm_head": "lm_head"}
# config fields that may differ: they change no block's shape or meaning
_FREE_CONFIG = {"eos_token_ids", "tie_word_embeddings"}


def layer_block(layer: int, unit: str) -> str:
    return f"layers.{layer}.{unit}"


@dataclass(frozen=True)
class BlockVariant:
    """A full fine-tune over the base: `weights` is its whole model, where every block
    it does not own is the very tensors of the base model (no copy)."""

    name: str
    path: Path
    weights: ModelWeights
    owned: frozenset[str]  # the blocks it holds itself, by name

    @property
    def nbytes(self) -> int:
        """Bytes of its own blocks only."""
        return sum(t.nbytes for block in self.owned for t in self.block_tensors(block))

    def block_tensors(self, block: str) -> list[torch.Tensor]:
        """The tensors it computes `block` with (the base's where it shares it)."""
        return _block_tensors(self.weights, block)

    def owned_blocks(self) -> list[str]:
        """Its own blocks in the order a token passes them."""
        order = ["embedding"]
        for i in range(len(self.weights.layers)):
            order.extend(layer_block(i, unit) for unit in LAYER_BLOCKS)
        order.extend(("norm", "lm_head"))
        return [b for b in order if b in self.owned]


def _block_tensors(weights: ModelWeights, block: str) -> list[torch.Tensor]:
    if block in TOP_BLOCKS:
        return [getattr(weights, TOP_BLOCKS[block])]
    _, layer, unit = block.split(".")
    fields = (getattr(weights.layers[int(layer)], f) for f in LAYER_BLOCKS[unit])
    return [t for t in fields if t is not None]


def checkpoint_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor an HF checkpoint of this shape holds, with its shape (`lm_head`
    included; a checkpoint with tied embeddings may leave it out)."""
    h, inter, v = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (v, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (v, h),
    }
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        att, mlp = p + "self_attn.", p + "mlp."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        for proj, out in (("q", q), ("k", kv), ("v", kv)):
            shapes[f"{att}{proj}_proj.weight"] = (out, h)
            if cfg.attention_bias:
                shapes[f"{att}{proj}_proj.bias"] = (out,)
        shapes[att + "o_proj.weight"] = (h, q)
        if cfg.output_bias:
            shapes[att + "o_proj.bias"] = (h,)
        for proj, shape in (("gate", (inter, h)), ("up", (inter, h)), ("down", (h, inter))):
            shapes[f"{mlp}{proj}_proj.weight"] = shape
            if cfg.mlp_bias:
                shapes[f"{mlp}{proj}_proj.bias"] = (shape[0],)
    return shapes


def check_config(cfg: ModelConfig, base: ModelConfig, where: str) -> None:
    ours, theirs = cfg.model_dump(exclude=_FREE_CONFIG), base.model_dump(exclude=_FREE_CONFIG)
    for field, value in ours.items():
        if value != theirs[field]:
            raise AdapterError(
                f"{where}: config {field} is {value!r}, the base model's is {theirs[field]!r} "
                "(a block variant must have the base's architecture)"
            )


def _open(folder: Path, where: str) -> dict[str, Any]:
    """Tensor name -> the open safetensors file holding it (nothing read yet)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise AdapterError(f"{where}: no *.safetensors files in the folder")
    handles: dict[str, Any] = {}
    for file in files:
        handle = safe_open(str(file), framework="pt")
        handles.update(dict.fromkeys(handle.keys(), handle))
    return handles


def check_tensor_shapes(held: dict[str, tuple[int, ...]], cfg: ModelConfig, where: str) -> None:
    """A full fine-tune's tensors (name -> shape) are exactly the base's layout."""
    shapes = checkpoint_shapes(cfg)
    for name, shape in sorted(held.items()):
        if name not in shapes:
            raise AdapterError(f"{where}: unexpected tensor {name!r} (not in the base's layout)")
        if shape != shapes[name]:
            raise AdapterError(
                f"{where}: tensor {name!r} is {list(shape)}, the base model's is "
                f"{list(shapes[name])}"
            )
    missing = sorted(set(shapes) - set(held) - {"lm_head.weight"})
    if missing:
        raise AdapterError(f"{where}: lacks tensor {missing[0]!r} of the base's layout")


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def _share_layer(i: int, ours: LayerWeights, base: LayerWeights, owned: set[str]) -> LayerWeights:
    """Layer `i` of the variant: each block equal to the base's is the base's tensors,
    each other one its own (added to `owned`)."""
    fields: dict[str, torch.Tensor | None] = {}
    for unit, names in LAYER_BLOCKS.items():
        mine = [getattr(ours, n) for n in names]
        theirs = [getattr(base, n) for n in names]
        if _same([t for t in mine if t is not None], [t for t in theirs if t is not None]):
            fields.update(zip(names, theirs, strict=True))
        else:
            owned.add(layer_block(i, unit))
            fields.update(zip(names, mine, strict=True))
    return LayerWeights(**fields)  # type: ignore[arg-type]


def _stream(
    handles: dict[str, Any], cfg: ModelConfig, base: ModelWeights, dtype: torch.dtype, where: Path
) -> tuple[ModelWeights, frozenset[str]]:
    """The variant's weights read one layer at a time (so loading holds at most one
    layer beyond the blocks kept), shared where equal to the base's."""

    def read(name: str) -> torch.Tensor:
        # a copy: a kept tensor must not hold the file's mapping (or its pages) alive
        return handles[name].get_tensor(name).to(dtype, copy=True)

    owned: set[str] = set()
    layers = []
    for i in range(cfg.num_hidden_layers):
        prefix = f"model.layers.{i}."
        raw = {n: read(n) for n in handles if n.startswith(prefix)}
        layers.append(
            _share_layer(i, build_layer(raw, cfg, i, dtype, where), base.layers[i], owned)
        )
    embed = read("model.embed_tokens.weight")
    tied = cfg.tie_word_embeddings or "lm_head.weight" not in handles
    head = (
        embed if tied else read("lm_head.weight")
    )  # [vocab, hidden]; the engine's is [hidden, vocab]
    top: dict[str, torch.Tensor] = {}
    for block, field, tensor in (
        ("embedding", "embed", embed),
        ("norm", "norm", read("model.norm.weight")),
        ("lm_head", "lm_head", head.t()),
    ):
        if torch.equal(tensor, getattr(base, field)):
            top[field] = getattr(base, field)
        else:
            owned.add(block)
            top[field] = tensor.contiguous()
    return ModelWeights(layers=layers, **top), frozenset(owned)


def load_block_variant(
    name: str, path: str | Path, base_config: ModelConfig, base: ModelWeights, dtype: torch.dtype
) -> BlockVariant:
    """Read a full fine-tune checkpoint (config.json + *.safetensors) of the base model
    as variant `name`; AdapterError naming the variant and what does not fit (the
    config field, or the tensor with both shapes)."""
    if not name or name == BASE_VARIANT:
        raise AdapterError(f"variant name {name!r}: give a name other than '' and 'base'")
    folder = Path(path)
    where = f"variant {name!r} ({folder})"
    if not folder.is_dir():
        raise AdapterError(f"{where}: folder does not exist")
    if (folder / "adapter_config.json").is_file():
        raise AdapterError(f"{where}: holds a LoRA adapter (adapter_config.json), not a checkpoint")
    try:
        cfg = load_model_config(folder)
        handles = _open(folder, where)
    except (CheckpointError, ValueError, OSError, SafetensorError) as exc:  # bad JSON too
        raise AdapterError(f"{where}: {exc}") from None
    check_config(cfg, base_config, where)
    shapes = {n: tuple(h.get_slice(n).get_shape()) for n, h in handles.items()}
    check_tensor_shapes(shapes, cfg, where)
    weights, owned = _stream(handles, cfg, base, dtype, folder)
    if not owned:  # most likely the base checkpoint itself, named by mistake
        raise AdapterError(
            f"{where}: every block equals the base model's; a robot that plans with the "
            "base names no variant"
        )
    return BlockVariant(name, folder, weights, owned)
