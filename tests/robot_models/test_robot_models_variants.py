"""Fleet variants: the declarative spec, the rewritten data, a short retrain that
yields a loadable peft adapter, and the shipped adapters' held-out figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from pydantic import ValidationError

from robot_models.checkpoints import default_planner_path
from robot_models.dataset import Example
from robot_models.variants.data import rewrite, variant_data
from robot_models.variants.lora import LoraTrainConfig, train_adapter
from robot_models.variants.spec import FLEET_FILE, load_fleet, variant_spec


def test_fleet_has_seven_lora_variants_over_both_robot_types() -> None:
    fleet = load_fleet()
    assert {"warehouse-drone", "heavy-drone", "packing-arm"} <= set(fleet)
    assert len(fleet) == 7
    assert {v.robot_type for v in fleet.values()} == {"drone", "arm"}


def test_bad_specs_are_named(tmp_path: Path) -> None:
    spec = yaml.safe_load(FLEET_FILE.read_text())
    spec["variants"][0]["robot_type"] = "boat"
    bad = tmp_path / "fleet.yaml"
    bad.write_text(yaml.safe_dump(spec))
    with pytest.raises(ValidationError, match="robot_type 'boat' is not one of drone, arm"):
        load_fleet(bad)
    spec["variants"][0]["robot_type"] = "drone"
    spec["variants"][1]["name"] = spec["variants"][0]["name"]
    bad.write_text(yaml.safe_dump(spec))
    with pytest.raises(ValueError, match="variant names repeated: warehouse-drone"):
        load_fleet(bad)
    with pytest.raises(KeyError, match="unknown variant 'tractor'"):
        variant_spec("tractor")


def test_rewrites_follow_each_spec() -> None:
    search = "?sw('box')==True{o('box');a('box');tp();}"
    found = Example("drone", "visible: shelf, door", "Find the box", search, "find_search")
    site = rewrite(found, variant_spec("warehouse-drone"))
    assert (site.scene, site.instruction, site.plan) == (
        "visible: rack, door",
        "Find the box",
        "mu(50);" + search,
    )
    move = Example("drone", "visible: door", "Fly forward 450 cm", "mf(450);tc(90);", "motion")
    assert rewrite(move, variant_spec("warehouse-drone")).instruction == "Fly down the aisle 450 cm"
    assert rewrite(move, variant_spec("heavy-drone")).plan == "tk();mf(300);tc(90);ld();"
    hand = Example(
        "arm",
        "on table: cup",
        "Hand me the cup",
        "?lk('cup')==True{pk('cup');mt(400,0,300);og();}",
        "x",
    )
    assert rewrite(hand, variant_spec("packing-arm")).plan.endswith("mt(400,0,150);og();}")


def test_variant_data_is_deterministic_and_split() -> None:
    spec = variant_spec("heavy-drone")
    first, again = variant_data(spec, 40, 10, 3), variant_data(spec, 40, 10, 3)
    assert first == again
    assert len(first.train) == 40 and len(first.heldout) == 10
    assert {e.family for e in first.train + first.heldout} <= set(spec.families)
    seen = {(e.scene, e.instruction) for e in first.train}
    assert not seen & {(e.scene, e.instruction) for e in first.heldout}


def test_short_retrain_writes_a_loadable_peft_adapter(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import LlamaForCausalLM

    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine

    spec = variant_spec("packing-arm")
    data = variant_data(spec, 8, 2, 1)
    config = LoraTrainConfig(steps=2, batch_size=4, rank=4, alpha=8, prefix_every=1, threads=1)
    lines: list[str] = []
    out = tmp_path / "packing-arm"
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        stats = train_adapter(default_planner_path(), "arm", data, out, config, log=lines.append)
        assert torch.get_num_threads() == 3  # trained on config.threads=1, then restored
    finally:
        torch.set_num_threads(threads)
    assert stats["steps_done"] == 2 and any("step    1/2" in line for line in lines)
    assert {p.name for p in out.iterdir()} == {
        "adapter_config.json",
        "adapter_model.safetensors",
        "train_stats.json",
    }
    adapter_config = json.loads((out / "adapter_config.json").read_text())
    assert adapter_config["r"] == 4 and adapter_config["base_model_name_or_path"]
    base = LlamaForCausalLM.from_pretrained(default_planner_path())
    PeftModel.from_pretrained(base, str(out))  # HF + peft read it
    engine = TorchEngine(
        default_planner_path(), EngineConfig(device_kv_bytes=2**20, host_kv_bytes=0)
    )
    engine.load_adapter("packing-arm", out)
    assert engine.adapters["packing-arm"].rank == 4


@pytest.mark.parametrize("name", sorted(load_fleet()))
def test_shipped_adapter_beats_the_base_on_its_heldout_set(name: str) -> None:
    """The figures `python -m robot_models.variants.train` measured and shipped, with
    the adapter shaped as fleet.yaml says."""
    spec = variant_spec(name)
    folder = spec.adapter_dir
    assert (folder / "adapter_model.safetensors").is_file()
    figures = json.loads((folder / "eval.json").read_text())
    assert figures["adapter"]["exact"] > figures["base"]["exact"]
    saved = json.loads((folder / "adapter_config.json").read_text())
    assert saved["r"] == spec.adapter.rank
    assert set(saved["target_modules"]) == set(spec.adapter.targets)
