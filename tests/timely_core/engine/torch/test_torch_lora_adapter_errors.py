"""Damaged or inconsistent LoRA adapter folders are refused at load with one
AdapterError line naming the adapter, its folder and what is wrong: a truncated
safetensors file, a NaN/inf/non-positive lora_alpha, non-finite or integer factors,
a target_modules that does not match the tensors. Copies of a shipped adapter are
damaged in tmp_path; the shipped folders are only read."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from lora_testkit import PLANNER, VARIANTS
from safetensors.torch import load_file, save_file

from timely_core.engine.protocol import AdapterError
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.lora import TARGETS, LoraAdapter, load_adapter
from timely_core.engine.torch.model.config import ModelConfig

SHIPPED = VARIANTS / "heavy-drone"  # rank 4, alpha 8, q/v/o of all 4 layers
WEIGHTS = "adapter_model.safetensors"
KEY = "base_model.model.model.layers.{}.self_attn.{}.lora_{}.weight"
_DROP = object()  # a config field removed
CFG = ModelConfig.from_hf(json.loads((PLANNER / "config.json").read_text()))


def _copy(tmp_path: Path, name: str = "bad") -> Path:
    folder = tmp_path / name
    shutil.copytree(SHIPPED, folder)
    return folder


def _with_config(tmp_path: Path, **changes: object) -> Path:
    folder = _copy(tmp_path)
    config = json.loads((SHIPPED / "adapter_config.json").read_text())
    for field, value in changes.items():
        if value is _DROP:
            config.pop(field, None)
        else:
            config[field] = value
    (folder / "adapter_config.json").write_text(json.dumps(config))  # NaN/Infinity as JS
    return folder


def _with_tensor(tmp_path: Path, key: str, value: torch.Tensor) -> Path:
    folder = _copy(tmp_path)
    tensors = load_file(str(SHIPPED / WEIGHTS))
    assert key in tensors
    tensors[key] = value
    save_file(tensors, str(folder / WEIGHTS))
    return folder


def _refused(folder: Path, what: str, dtype: torch.dtype = torch.float32) -> str:
    """The one-line AdapterError for `folder` loaded as 'x', checked to name it."""
    with pytest.raises(AdapterError) as raised:
        load_adapter("x", folder, CFG, dtype)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"adapter 'x' ({folder}): "), message
    assert re.search(what, message), message
    return message


@pytest.mark.parametrize("size", [0, 7, 100, "half", "minus1"])
def test_truncated_safetensors_is_an_adapter_error(tmp_path: Path, size: int | str) -> None:
    folder = _copy(tmp_path)
    data = (SHIPPED / WEIGHTS).read_bytes()
    cut = {"half": len(data) // 2, "minus1": len(data) - 1}.get(str(size), size)
    assert isinstance(cut, int)
    (folder / WEIGHTS).write_bytes(data[:cut])
    _refused(folder, rf"adapter_model\.safetensors is unreadable \({cut} bytes")


def test_not_safetensors_at_all(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / WEIGHTS).write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0\n")
    _refused(folder, r"adapter_model\.safetensors is unreadable .*header")


@pytest.mark.parametrize(
    "alpha", [float("nan"), float("inf"), float("-inf"), 0, -8, True, "8", None, [8]]
)
def test_lora_alpha_must_be_finite_and_positive(tmp_path: Path, alpha: object) -> None:
    folder = _with_config(tmp_path, lora_alpha=alpha)
    _refused(folder, r"lora_alpha=.* in adapter_config\.json is not a finite number > 0")


@pytest.mark.parametrize("r", [True, 0, -4, "4", 4.0, None])
def test_r_must_be_a_positive_integer(tmp_path: Path, r: object) -> None:
    folder = _with_config(tmp_path, r=r)
    _refused(folder, r"r=.* in adapter_config\.json is not a positive integer")


def test_config_that_is_not_an_object(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "adapter_config.json").write_text("[1, 2]")
    _refused(folder, r"adapter_config\.json is not a JSON object")
    (folder / "adapter_config.json").write_bytes(b'{"r": "\xff"}')
    _refused(folder, r"adapter_config\.json is not JSON")


@pytest.mark.parametrize(
    ("layer", "module", "which", "bad"),
    [
        (0, "o_proj", "B", float("nan")),
        (3, "q_proj", "A", float("inf")),
        (2, "v_proj", "B", float("-inf")),
    ],
)
def test_non_finite_factors_are_named(
    tmp_path: Path, layer: int, module: str, which: str, bad: float
) -> None:
    key = KEY.format(layer, module, which)
    tensor = load_file(str(SHIPPED / WEIGHTS))[key].clone()
    tensor[0, 1] = bad
    folder = _with_tensor(tmp_path, key, tensor)
    _refused(
        folder, rf"layers\.{layer}\.self_attn\.{module}\.lora_{which} has 1 NaN or inf values$"
    )


def test_factors_that_overflow_the_engine_dtype(tmp_path: Path) -> None:
    """Finite in the file, inf once scaled (alpha / r = 2) and cast to float16."""
    key = KEY.format(1, "v_proj", "B")
    tensor = load_file(str(SHIPPED / WEIGHTS))[key].clone()
    tensor[3, 0] = 40000.0  # float16 holds 65504 at most
    folder = _with_tensor(tmp_path, key, tensor)
    _refused(
        folder,
        r"layers\.1\.self_attn\.v_proj\.lora_B has 1 NaN or inf values once scaled by 2 in "
        r"torch\.float16",
        torch.float16,
    )
    assert isinstance(load_adapter("x", folder, CFG, torch.float32), LoraAdapter)


def test_integer_factors_are_refused(tmp_path: Path) -> None:
    key = KEY.format(2, "q_proj", "A")
    folder = _with_tensor(tmp_path, key, torch.ones(4, CFG.hidden_size, dtype=torch.int8))
    _refused(folder, rf"tensor {re.escape(repr(key))} is torch\.int8, not float16")


@pytest.mark.parametrize(
    ("targets", "selects"),
    [
        (["k_proj", "gate_proj"], r"selects \[k_proj, gate_proj\]"),
        (["q_proj", "v_proj"], r"selects \[q_proj, v_proj\]"),
        (["q_proj", "k_proj", "v_proj", "o_proj"], r"selects \[q_proj, k_proj, v_proj, o_proj\]"),
        ("all-linear", r"selects \[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"),
        (r".*\.(q|v)_proj", r"selects \[q_proj, v_proj\]"),
        (r".*\.layers\.[0-2]\.self_attn\.(q|v|o)_proj", r"selects \[q_proj \(layers 0,1,2\)"),
    ],
)
def test_target_modules_must_match_the_tensors(
    tmp_path: Path, targets: object, selects: str
) -> None:
    folder = _with_config(tmp_path, target_modules=targets)
    message = _refused(folder, rf"target_modules={re.escape(repr(targets))} in adapter_config")
    assert re.search(selects, message), message
    assert "the tensors cover [q_proj, v_proj, o_proj]" in message


def test_layers_to_transform_must_match_the_tensors(tmp_path: Path) -> None:
    folder = _with_config(tmp_path, layers_to_transform=[3])
    _refused(
        folder,
        r"selects \[q_proj \(layers 3\), v_proj \(layers 3\), o_proj \(layers 3\)\], the "
        r"tensors cover \[q_proj, v_proj, o_proj\] \(layers\.0\.self_attn\.o_proj has tensors "
        r"but is not targeted\)",
    )
    folder = _with_config(tmp_path / "exclude", exclude_modules=["o_proj"])
    _refused(folder, r"selects \[q_proj, v_proj\], the tensors cover \[q_proj, v_proj, o_proj\]")


@pytest.mark.parametrize(
    ("targets", "why"),
    [
        (_DROP, "neither a list of module names nor a regex"),
        (None, "neither a list of module names nor a regex"),
        ([], "neither a list of module names nor a regex"),
        (["q_proj", 3], "neither a list of module names nor a regex"),
        ("(q_proj", r"target_modules='\(q_proj' in adapter_config\.json is not a valid regex"),
    ],
)
def test_unreadable_target_modules(tmp_path: Path, targets: object, why: str) -> None:
    _refused(_with_config(tmp_path, target_modules=targets), why)


@pytest.mark.parametrize(
    "changes",
    [
        {"target_modules": ["v_proj", "o_proj", "q_proj"]},  # any order
        {"target_modules": ["self_attn.q_proj", "v_proj", "self_attn.o_proj"]}
        | {"layers_to_transform": [0, 1, 2, 3]},
        {"target_modules": ["q_proj", "v_proj", "o_proj", "c_attn"]},  # c_attn: not in llama
        {"target_modules": r"model\.layers\.\d+\.self_attn\.(q|v|o)_proj"},
        {"target_modules": r".*(q|v|o)_proj", "exclude_modules": ["k_proj"]},
        {"layers_to_transform": [0, 1, 2, 3], "layers_pattern": "layers"},
        {"base_model_name_or_path": "somewhere/else"},  # shapes decide, as before
    ],
)
def test_peft_equivalent_configs_load_the_same_factors(
    tmp_path: Path, changes: dict[str, object]
) -> None:
    reference = load_adapter("x", SHIPPED, CFG, torch.float32)
    adapter = load_adapter("x", _with_config(tmp_path, **changes), CFG, torch.float32)
    assert adapter.rank == reference.rank and adapter.scaling == reference.scaling
    for ours, theirs in zip(adapter.layers, reference.layers, strict=True):
        assert ours.keys() == theirs.keys()
        for slot in ours:
            assert torch.equal(ours[slot].a, theirs[slot].a)
            for part, other in zip(ours[slot].parts, theirs[slot].parts, strict=True):
                assert torch.equal(part.b, other.b) and part.columns == other.columns


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_every_shipped_adapter_loads_as_before(dtype: torch.dtype) -> None:
    """The factors are exactly A^T and (B * alpha / r)^T in the engine's dtype."""
    for folder in sorted(VARIANTS.iterdir()):
        if not (folder / "adapter_config.json").is_file():
            continue
        adapter = load_adapter(folder.name, folder, CFG, dtype)
        config = json.loads((folder / "adapter_config.json").read_text())
        tensors = load_file(str(folder / WEIGHTS))
        scaling = config["lora_alpha"] / config["r"]
        assert adapter.scaling == scaling
        q, kv = CFG.num_attention_heads * CFG.head_dim, CFG.num_key_value_heads * CFG.head_dim
        first = {  # where each target's output starts in its fused slot (loader.py)
            "q_proj": 0,
            "k_proj": q,
            "v_proj": q + kv,
            "o_proj": 0,
            "gate_proj": 0,
            "up_proj": CFG.intermediate_size,
            "down_proj": 0,
        }
        checked = 0
        for key in tensors:
            match = re.match(r".*layers\.(\d+)\.\w+\.(\w+)\.lora_A\.weight$", key)
            if match is None:
                continue
            layer, target = int(match.group(1)), match.group(2)
            slot = adapter.layers[layer][TARGETS[target][1]]
            (part,) = [p for p in slot.parts if p.columns.start == first[target]]
            a = tensors[key].to(torch.float32).t().to(dtype)
            b_key = key.replace("lora_A", "lora_B")
            b = (tensors[b_key].to(torch.float32) * scaling).t().to(dtype)
            assert torch.equal(slot.a[:, part.ranks], a) and torch.equal(part.b, b), key
            checked += 1
        assert checked == sum(len(s.parts) for slots in adapter.layers for s in slots.values())


def test_engine_keeps_serving_after_a_refused_adapter(tmp_path: Path) -> None:
    engine = TorchEngine(PLANNER, EngineConfig(device_kv_bytes=2**20, host_kv_bytes=0))
    folder = _copy(tmp_path, "broken")
    (folder / WEIGHTS).write_bytes(b"")
    with pytest.raises(AdapterError, match=r"adapter 'broken' \(.*broken\): adapter_model"):
        engine.load_adapter("broken", folder)
    assert "broken" not in engine.adapters and not engine.resident_weights().variants
    engine.load_adapter("broken", SHIPPED)  # the name is free again
    assert [v.name for v in engine.resident_weights().variants] == ["broken"]
