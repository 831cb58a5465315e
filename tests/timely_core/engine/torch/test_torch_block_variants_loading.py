"""Loading a full fine-tune as a block variant: a folder that is not a checkpoint of
the base model's architecture is refused with the variant and what does not fit
named (config field, tensor and both shapes), and leaves the engine as it was."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from block_testkit import full_finetune
from engine_testkit import save_checkpoint
from lora_testkit import random_adapter
from safetensors.torch import load_file, save_file

from timely_core.engine.protocol import AdapterError
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.variants import ResidentWeights


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("block_loading"), "llama", seed=9)


@pytest.fixture(scope="module")
def variant(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("block_loading_variant") / "ffn"
    return full_finetune(base, out, seed=1, blocks={"layers.0.ffn"})


def _engine(base: Path) -> TorchEngine:
    return TorchEngine(base, EngineConfig(block_size=8, device_kv_bytes=2**20, host_kv_bytes=0))


def _config(key: str, value: object) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        raw = json.loads((folder / "config.json").read_text())
        raw[key] = value
        (folder / "config.json").write_text(json.dumps(raw))

    return edit


def _tensors(change: Callable[[dict[str, torch.Tensor]], object]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        tensors = load_file(str(folder / "model.safetensors"))
        change(tensors)
        save_file(tensors, str(folder / "model.safetensors"))

    return edit


UP = "model.layers.1.mlp.up_proj.weight"
K = "model.layers.0.self_attn.k_proj.weight"
CASES: dict[str, tuple[Callable[[Path], object], str]] = {
    "layers": (
        _config("num_hidden_layers", 3),
        r"config num_hidden_layers is 3, the base model's is 2",
    ),
    "ffn width": (_config("intermediate_size", 200), r"config intermediate_size is 200, the base"),
    "shape": (
        _tensors(lambda t: t.__setitem__(UP, torch.zeros(200, 64))),
        rf"tensor '{UP}' is \[200, 64\], the base model's is \[160, 64\]",
    ),
    "missing": (_tensors(lambda t: t.pop(K)), rf"lacks tensor '{K}'"),
    "unexpected": (
        _tensors(lambda t: t.__setitem__("model.layers.0.mlp.extra.weight", torch.zeros(2))),
        r"unexpected tensor 'model.layers.0.mlp.extra.weight'",
    ),
    "no weights": (lambda f: (f / "model.safetensors").unlink(), r"no \*\.safetensors files"),
    "bad json": (lambda f: (f / "config.json").write_text("{"), r"config\.json|Expecting"),
    "neither": (
        lambda f: (f / "config.json").unlink(),
        r"neither a peft LoRA adapter \(adapter_config\.json\) nor a full fine-tune",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_checkpoint_folder_is_named(
    case: str, base: Path, variant: Path, tmp_path: Path
) -> None:
    edit, message = CASES[case]
    folder = tmp_path / "bad"
    shutil.copytree(variant, folder)
    edit(folder)
    engine = _engine(base)
    with pytest.raises(AdapterError, match=message) as error:
        engine.load_adapter("site-x", folder)
    assert "'site-x'" in str(error.value)  # the variant is named
    assert engine.resident_weights() == ResidentWeights(engine.model.weights_nbytes)
    assert not engine.block_variants and not engine.adapters


def test_names_and_folders_are_checked(base: Path, variant: Path, tmp_path: Path) -> None:
    engine = _engine(base)
    with pytest.raises(AdapterError, match=r"'site-x' .*folder does not exist"):
        engine.load_adapter("site-x", tmp_path / "nowhere")
    with pytest.raises(AdapterError, match="give a name other than '' and 'base'"):
        engine.load_adapter("base", variant)
    with pytest.raises(AdapterError, match="every block equals the base model's"):
        engine.load_adapter("site-x", base)  # the base itself, named as a variant
    lora = random_adapter(base, tmp_path / "lora", seed=2)
    with pytest.raises(AdapterError, match=r"holds a LoRA adapter \(adapter_config\.json\)"):
        engine.load_block_variant("site-x", lora)
    engine.load_adapter("site-x", variant)
    with pytest.raises(AdapterError, match="variant 'site-x' is already loaded"):
        engine.load_adapter("site-x", lora)  # a LoRA may not take a fine-tune's name
    assert engine.resident_weights().names() == ["site-x"]
    assert engine.block_variants["site-x"].owned == {"layers.0.ffn"}
