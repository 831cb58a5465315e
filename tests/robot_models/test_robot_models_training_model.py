"""The training model is the HF Llama architecture: a checkpoint it saves loads in
transformers with identical logits, and prefix-shared batches equal full sequences."""

# mypy: disable-error-code="no-untyped-def"

import torch
import torch.nn.functional as F

from robot_models.training.batches import IGNORE, EncodedExample, collate
from robot_models.training.hf_format import load_checkpoint, save_checkpoint
from robot_models.training.model import LlamaShape, TinyLlama, causal_attention

SHAPE = LlamaShape(
    vocab_size=97,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


def test_saved_checkpoint_matches_transformers_llama(tmp_path):
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = TinyLlama(SHAPE).eval()
    save_checkpoint(model, tmp_path, eos_id=0, pad_id=1)
    reference = LlamaForCausalLM.from_pretrained(tmp_path).eval()
    ids = torch.randint(0, SHAPE.vocab_size, (2, 30))
    with torch.no_grad():
        ours, _ = model(ids)
        theirs = reference(ids).logits
    assert torch.allclose(ours, theirs, atol=1e-5)
    reloaded = load_checkpoint(tmp_path)
    with torch.no_grad():
        assert torch.equal(reloaded(ids)[0], ours)


def test_shared_prefix_batch_equals_full_sequences():
    torch.manual_seed(1)
    model = TinyLlama(SHAPE).eval()
    prefix = torch.randint(0, SHAPE.vocab_size, (1, 20))
    suffixes = torch.randint(0, SHAPE.vocab_size, (3, 9))
    with torch.no_grad():
        _, kv = model(prefix)
        shared, _ = model(suffixes, past=kv)
        full, _ = model(torch.cat([prefix.expand(3, -1), suffixes], dim=1))
    assert torch.allclose(shared, full[:, 20:], atol=1e-5)


def test_collate_trains_only_on_plan_and_eos():
    example = EncodedExample(
        "drone", (5, 6, 7, 8, 9, 0), request_len=3
    )  # request 5 6 7, plan 8 9, eos 0
    ids, targets = collate([example, EncodedExample("drone", (5, 6, 0), request_len=2)], pad_id=1)
    assert ids[0].tolist() == [5, 6, 7, 8, 9, 0]
    assert targets[0].tolist() == [IGNORE, IGNORE, 8, 9, 0, IGNORE]
    assert ids[1].tolist() == [5, 6, 0, 1, 1, 1]
    assert targets[1].tolist() == [IGNORE, 0, IGNORE, IGNORE, IGNORE, IGNORE]


def test_causal_attention_equals_masked_sdpa_with_and_without_a_past():
    torch.manual_seed(2)
    for past in (0, 5):
        q = torch.randn(2, 4, 7, 12)
        k, v = torch.randn(2, 2, past + 7, 12), torch.randn(2, 2, past + 7, 12)
        mask = torch.ones(7, past + 7, dtype=torch.bool).tril(past)
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        assert torch.allclose(causal_attention(q, k, v, past, 12**-0.5), expected, atol=1e-6)


def test_tied_model_saves_as_an_untied_llama_with_equal_output_and_embedding(tmp_path):
    from transformers import LlamaForCausalLM

    torch.manual_seed(2)
    model = TinyLlama(SHAPE, tie_embeddings=True).eval()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    save_checkpoint(model, tmp_path, eos_id=0, pad_id=1)
    reference = LlamaForCausalLM.from_pretrained(tmp_path).eval()
    ids = torch.randint(0, SHAPE.vocab_size, (1, 12))
    with torch.no_grad():
        assert torch.allclose(model(ids)[0], reference(ids).logits, atol=1e-5)
    reloaded = load_checkpoint(tmp_path, tie_embeddings=True)
    assert reloaded.lm_head.weight is reloaded.model.embed_tokens.weight


def test_an_untied_checkpoint_cannot_be_loaded_tied(tmp_path):
    import pytest

    save_checkpoint(TinyLlama(SHAPE), tmp_path, eos_id=0, pad_id=1)
    with pytest.raises(ValueError, match="untied"):
        load_checkpoint(tmp_path, tie_embeddings=True)
