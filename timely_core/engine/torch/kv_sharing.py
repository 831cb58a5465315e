"""Which fleet variants write the base model's KV, so the prefix cache may serve
them the base's blocks (and the base, and each other, theirs).

Layer i's K and V are its k/v projections (then rotary on K) of its input after its
input norm; that input is the embedding run through every earlier layer whole
(attention with its o projection, the post-attention norm, the FFN). So a variant's
KV of every layer is the base's exactly when the embedding, every layer before the
last, and the last layer's input norm and k/v projections are the base's. The last
layer's q and o projections, its post-attention norm and FFN, the final norm and
lm_head act only on what follows its KV. The check is structural (which tensors a
variant holds or adapts), never numerical: equal by construction, bit for bit.
"""

from __future__ import annotations

import torch

from timely_core.engine.torch.block_variants import LAYER_BLOCKS, BlockVariant, layer_block
from timely_core.engine.torch.lora import LoraAdapter
from timely_core.engine.torch.model.config import ModelConfig
from timely_core.engine.torch.model.llama import ModelWeights


def _upstream_blocks(num_layers: int) -> set[str]:
    """Blocks every layer's KV depends on in full (the last layer's attention aside)."""
    last = num_layers - 1
    blocks = {"embedding", layer_block(last, "input_norm")}
    blocks.update(layer_block(i, unit) for i in range(last) for unit in LAYER_BLOCKS)
    return blocks


def _kv_columns(config: ModelConfig) -> slice:
    """The k and v columns of the fused qkv projection ([in, q | k | v])."""
    return slice(config.num_attention_heads * config.head_dim, None)


def block_variant_writes_base_kv(
    variant: BlockVariant, base: ModelWeights, config: ModelConfig
) -> bool:
    """Whether the full fine-tune's KV is the base's: it owns no block upstream of
    the last layer's attention, and there (when it owns that block) its k/v weights
    and biases equal the base's."""
    if variant.owned & _upstream_blocks(config.num_hidden_layers):
        return False
    last = config.num_hidden_layers - 1
    if layer_block(last, "attention") not in variant.owned:
        return True
    ours, theirs, kv = variant.weights.layers[last], base.layers[last], _kv_columns(config)
    if not torch.equal(ours.qkv[:, kv], theirs.qkv[:, kv]):
        return False
    if ours.qkv_bias is None or theirs.qkv_bias is None:
        return ours.qkv_bias is theirs.qkv_bias
    return torch.equal(ours.qkv_bias[kv], theirs.qkv_bias[kv])


def lora_writes_base_kv(adapter: LoraAdapter, config: ModelConfig) -> bool:
    """Whether the adapter leaves the KV the base's: it adapts nothing before the last
    layer, and in the last layer no k_proj or v_proj (q, o and the FFN are free)."""
    *before, last = adapter.layers
    if any(before):
        return False
    qkv = last.get("qkv")
    if qkv is None:
        return True
    first_kv = _kv_columns(config).start
    return all(part.columns.stop <= first_kv for part in qkv.parts)
