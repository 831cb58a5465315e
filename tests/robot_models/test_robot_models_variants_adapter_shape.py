"""Adapters sized per variant: bad shapes are refused naming the field, an adapter
trained on some projections of some layers holds exactly those, and the engine
counts exactly its bytes."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml
from pydantic import ValidationError
from safetensors import safe_open

from robot_models.checkpoints import default_planner_path
from robot_models.training.hf_format import load_checkpoint
from robot_models.training.model import DecoderLayer
from robot_models.variants.adapter_shape import AdapterShape
from robot_models.variants.cli import add_config_flags, config_from, parse_config_args
from robot_models.variants.data import variant_data
from robot_models.variants.full_tune import FullTuneConfig, trainable_parameters
from robot_models.variants.lora import LoraTrainConfig, train_adapter
from robot_models.variants.spec import FLEET_FILE, VariantSpec, load_fleet, variant_spec
from robot_models.variants.train import variant_config

PLANNER = default_planner_path()


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"rank": 0}, "rank"),
        ({"rank": 65}, "rank"),
        ({"alpha": -1}, "alpha"),
        ({"targets": ["qkv_proj"]}, "targets"),
        ({"targets": []}, "targets"),
        ({"targets": ["q_proj", "q_proj"]}, "targets"),
        ({"layers": []}, "layers"),
        ({"layers": [-1]}, "layers"),
        ({"lora_rank": 4}, "lora_rank"),
    ],
)
def test_bad_adapter_shapes_name_the_field(fields: dict[str, object], named: str) -> None:
    with pytest.raises(ValidationError, match=named) as caught:
        AdapterShape.model_validate(fields)
    assert caught.value.errors()[0]["loc"][0] == named


def test_bad_adapter_in_fleet_yaml_is_named(tmp_path: Path) -> None:
    spec = yaml.safe_load(FLEET_FILE.read_text())
    spec["variants"][0]["adapter"] = {"rank": 4, "targets": ["q_proj", "attention"]}
    bad = tmp_path / "fleet.yaml"
    bad.write_text(yaml.safe_dump(spec))
    with pytest.raises(
        ValidationError, match=r"adapter\.targets[\s\S]*'attention' not a projection"
    ):
        load_fleet(bad)


def test_layers_beyond_the_base_are_refused(tmp_path: Path) -> None:
    data = variant_data(variant_spec("heavy-drone"), 4, 1, 1)
    config = LoraTrainConfig(steps=1, batch_size=2, layers="1,4", threads=1)
    with pytest.raises(
        ValueError, match=r"adapter layers \[4\] are not in the base model \(4 layers"
    ):
        train_adapter(PLANNER, "drone", data, tmp_path / "x", config, log=lambda _: None)
    assert not (tmp_path / "x").exists()


def test_restricted_adapter_holds_only_its_targets_and_is_counted_exactly(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import LlamaForCausalLM

    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine

    data = variant_data(variant_spec("heavy-drone"), 8, 2, 1)
    config = LoraTrainConfig(
        steps=2, batch_size=2, rank=2, alpha=4, targets="q_proj,o_proj", layers="3", threads=1
    )
    out = tmp_path / "small"
    train_adapter(PLANNER, "drone", data, out, config, log=lambda _: None)
    with safe_open(str(out / "adapter_model.safetensors"), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open has no iter)
    modules = {k.split(".lora_")[0].split("model.layers.")[1] for k in tensors}
    assert modules == {"3.self_attn.q_proj", "3.self_attn.o_proj"}
    assert all(2 in t.shape for t in tensors.values())
    saved = json.loads((out / "adapter_config.json").read_text())
    assert saved["layers_to_transform"] == [3] and saved["r"] == 2
    PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(PLANNER), str(out))
    engine = TorchEngine(PLANNER, EngineConfig(device_kv_bytes=2**20, host_kv_bytes=0))
    before = engine.resident_weights().total_bytes
    engine.load_adapter("small", out)
    weights = engine.resident_weights()
    file_bytes = sum(t.numel() * t.element_size() for t in tensors.values())
    assert file_bytes == 2 * (192 + 192) * 2 * 4  # rank 2, two 192 -> 192 projections, fp32
    assert [v.nbytes for v in weights.variants] == [file_bytes]
    assert weights.total_bytes == before + file_bytes


def test_fleet_shapes_reach_the_training_config() -> None:
    shape = variant_spec("heavy-drone").adapter
    flags = shape.flags()
    assert AdapterShape.from_flags(**flags) == shape.model_copy(update={"alpha": shape.lora_alpha})  # type: ignore[arg-type]


def test_a_variants_training_settings_apply_unless_the_command_sets_them() -> None:
    config = LoraTrainConfig()
    heavy, warehouse = variant_spec("heavy-drone"), variant_spec("warehouse-drone")
    assert heavy.training.steps is not None and heavy.training.lr is None
    assert variant_config(heavy, config, set()).steps == heavy.training.steps
    assert variant_config(heavy, config, set()).lr == config.lr  # not overridden
    assert variant_config(warehouse, config, set()).lr == warehouse.training.lr
    flagged = replace(config, steps=7, rank=2, lr=0.1)
    chosen = variant_config(warehouse, flagged, {"steps", "rank", "lr"})
    assert (chosen.steps, chosen.rank, chosen.lr) == (7, 2, 0.1)
    assert chosen.batch_size == warehouse.training.batch_size
    assert variant_config(heavy, config, set()).rank == heavy.adapter.rank
    with pytest.raises(ValidationError, match=r"training\.steps"):
        VariantSpec.model_validate({**heavy.model_dump(), "training": {"steps": 0}})
    with pytest.raises(ValidationError, match=r"training\.epochs"):
        VariantSpec.model_validate({**heavy.model_dump(), "training": {"epochs": 3}})


def test_a_flag_given_with_its_defaults_value_still_wins_over_fleet_yaml() -> None:
    """`--rank 8` is the flag's default, and fleet.yaml gives warehouse-drone rank 4:
    what the command line says is what trains."""
    defaults = LoraTrainConfig()
    parser = argparse.ArgumentParser()
    add_config_flags(parser, LoraTrainConfig)
    argv = ["--rank", str(defaults.rank), "--lr", str(defaults.lr)]
    args, given = parse_config_args(parser, argv, LoraTrainConfig)
    assert given == {"rank", "lr"} and args.steps == defaults.steps
    warehouse = variant_spec("warehouse-drone")
    assert warehouse.adapter.rank != defaults.rank and warehouse.training.lr != defaults.lr
    chosen = variant_config(warehouse, config_from(args, LoraTrainConfig), given)
    assert (chosen.rank, chosen.lr) == (defaults.rank, defaults.lr)
    assert chosen.steps == warehouse.training.steps  # not given: fleet.yaml's


def test_the_shipped_adapters_were_trained_as_fleet_yaml_says() -> None:
    """`python -m robot_models.variants.train NAME` reproduces each shipped adapter's
    training settings (train_stats.json records them)."""
    for spec in load_fleet().values():
        stats = spec.adapter_dir / "train_stats.json"
        if not (spec.adapter_dir / "adapter_config.json").is_file():
            continue  # a full fine-tune (train_full)
        recorded = json.loads(stats.read_text())["config"]
        config = variant_config(spec, LoraTrainConfig(), set())
        for field in ("steps", "batch_size", "lr", "prefix_every", "rank", "targets"):
            assert recorded[field] == getattr(config, field), (spec.name, field)


def test_full_tune_units_choose_the_trained_blocks() -> None:
    model = load_checkpoint(PLANNER)
    chosen = trainable_parameters(model, FullTuneConfig(units="attention", lm_head=False))
    last = model.model.layers[3]
    assert isinstance(last, DecoderLayer)
    attention = last.self_attn
    assert {id(p) for p in chosen} == {id(p) for p in attention.parameters()}
    assert all(p.requires_grad == (id(p) in {id(c) for c in chosen}) for p in model.parameters())
    with pytest.raises(ValueError, match="units 'attn': give one or more of input_norm"):
        trainable_parameters(model, FullTuneConfig(units="attn"))
    assert isinstance(chosen[0], torch.nn.Parameter)
