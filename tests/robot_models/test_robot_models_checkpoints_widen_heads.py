"""Widening the planner's heads (for FlashInfer's head sizes) changes no plan: HF
transformers, the reference implementation, plans the LRTrace tasks identically on
the widened checkpoint, with and without a fleet variant widened beside it."""

# mypy: disable-error-code="no-untyped-def"

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from robot_models.checkpoints import CHECKPOINT_DIR, default_planner_path
from robot_models.checkpoints.widen_heads import (
    WIDENED_FROM,
    WidenError,
    main,
    new_positions,
    widen,
)
from robot_models.dataset import LRTRACE_TASKS
from timely_core.engine.torch.model.config import RopeConfig
from timely_core.engine.torch.model.rope import inverse_frequencies

PLANNER = default_planner_path()
VARIANT = CHECKPOINT_DIR / "variants" / "warehouse-drone"  # a LoRA adapter (q, v, o)


@pytest.fixture(scope="module")
def widened(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return widen(PLANNER, tmp_path_factory.mktemp("planner") / "hd64", 64)


def _plans(path: Path, robot_type: str, adapter: Path | None = None) -> list[tuple[str, bool]]:
    from robot_models.reference_planner import ReferencePlanner

    planner = ReferencePlanner(path, adapter=adapter)
    tasks = [(t.scene, t.instruction) for t in LRTRACE_TASKS if t.robot_type == robot_type]
    return planner.plan_batch(robot_type, tasks)


def test_each_old_dim_keeps_its_rotary_frequency():
    rope = RopeConfig(rope_theta=10000.0)
    old, new = inverse_frequencies(rope, 32), inverse_frequencies(rope, 64)
    positions = new_positions(32, 64)
    assert positions.tolist()[:3] == [0, 2, 4] and positions.tolist()[16:19] == [32, 34, 36]
    # dim p of a head turns at frequency index p mod (width / 2)
    assert torch.equal(new[positions[:16]], old)
    assert torch.equal(new[positions[16:] - 32], old)


def test_widened_checkpoint_has_wider_heads_and_the_same_other_weights(widened: Path):
    config = json.loads((widened / "config.json").read_text())
    assert config["head_dim"] == 64
    assert json.loads((widened / WIDENED_FROM).read_text())["head_dim"] == 32
    assert (widened / "tokenizer.json").read_bytes() == (PLANNER / "tokenizer.json").read_bytes()
    old, new = (
        load_file(str(PLANNER / "model.safetensors")),
        load_file(str(widened / "model.safetensors")),
    )
    assert new.keys() == old.keys()
    q = "model.layers.0.self_attn.q_proj.weight"
    assert new[q].shape == (6 * 64, 192) and new[q].view(6, 64, 192)[:, 1::2].abs().sum() == 0
    assert torch.allclose(
        new[q].view(6, 64, 192)[:, 0:32:2], old[q].view(6, 32, 192)[:, :16] * 2**0.5
    )
    o = "model.layers.0.self_attn.o_proj.weight"
    assert new[o].shape == (192, 6 * 64)
    for name in ("model.embed_tokens.weight", "model.layers.3.mlp.down_proj.weight"):
        assert torch.equal(new[name], old[name])


@pytest.mark.parametrize("robot_type", ["drone", "arm"])
def test_widened_planner_plans_every_lrtrace_task_as_the_original(widened: Path, robot_type: str):
    expected = _plans(PLANNER, robot_type)
    assert all(ended for _, ended in expected)
    assert _plans(widened, robot_type) == expected


def test_a_fleet_variant_widened_with_its_base_plans_as_before(widened: Path, tmp_path: Path):
    adapter = widen(VARIANT, tmp_path / "adapter", 64, base=PLANNER)
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config == json.loads((VARIANT / "adapter_config.json").read_text())
    expected = _plans(PLANNER, "drone", adapter=VARIANT)
    assert expected != _plans(PLANNER, "drone")  # the variant plans differently
    assert _plans(widened, "drone", adapter=adapter) == expected


def test_a_width_that_is_no_whole_multiple_is_refused(tmp_path: Path):
    for width in (48, 32, 16):
        with pytest.raises(WidenError, match=f"cannot widen to {width}"):
            widen(PLANNER, tmp_path / str(width), width)
        assert not (tmp_path / str(width)).exists()  # nothing written


def test_a_non_empty_destination_is_refused(tmp_path: Path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(WidenError, match="not empty"):
        widen(PLANNER, tmp_path, 64)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_attention_biases_are_widened_with_their_rows(tmp_path: Path):
    from transformers import LlamaForCausalLM

    source = tmp_path / "biased"  # the planner with q/k/v/o biases (as Qwen2 has q/k/v)
    source.mkdir()
    config = json.loads((PLANNER / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "attention_bias": True}))
    tensors = load_file(str(PLANNER / "model.safetensors"))
    generator = torch.Generator().manual_seed(0)
    for layer in range(config["num_hidden_layers"]):
        for projection, size in (("q", 192), ("k", 64), ("v", 64), ("o", 192)):
            bias = torch.randn(size, generator=generator) * 0.5
            tensors[f"model.layers.{layer}.self_attn.{projection}_proj.bias"] = bias
    save_file(tensors, str(source / "model.safetensors"))
    widened = widen(source, tmp_path / "out", 64)
    ids = torch.tensor([[5, 17, 300, 42, 9, 1000, 77, 3, 250, 18]])
    with torch.no_grad():
        narrow = LlamaForCausalLM.from_pretrained(source, dtype=torch.float32).eval()(ids)
        wide = LlamaForCausalLM.from_pretrained(widened, dtype=torch.float32).eval()(ids)
    assert wide.logits.shape == narrow.logits.shape
    assert torch.allclose(wide.logits, narrow.logits, atol=1e-3)
    assert not torch.allclose(  # the biases did change the model
        narrow.logits,
        LlamaForCausalLM.from_pretrained(PLANNER, dtype=torch.float32).eval()(ids).logits,
        atol=1e-2,
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, "rope type 'yarn'"),
        ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, "rope type 'dynamic'"),
        ({"partial_rotary_factor": 0.5}, "partial rotary"),
    ],
)
def test_a_rotary_embedding_that_reads_the_head_width_is_refused(
    tmp_path: Path, change: dict[str, object], message: str
):
    source = tmp_path / "source"
    source.mkdir()
    config = json.loads((PLANNER / "config.json").read_text())
    config.pop("rope_parameters")
    (source / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(WidenError, match=message):
        widen(source, tmp_path / "out", 64)
    assert not (tmp_path / "out").exists()


def test_cli_names_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main([str(tmp_path / "absent"), str(tmp_path / "out"), "--head-dim", "64"]) == 2
    assert "no config.json" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text((PLANNER / "config.json").read_text())
    assert main([str(tmp_path / "empty"), str(tmp_path / "out"), "--head-dim", "64"]) == 2
    assert (
        "holds neither model.safetensors nor adapter_model.safetensors" in capsys.readouterr().err
    )
