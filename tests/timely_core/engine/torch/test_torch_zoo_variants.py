"""The torch engine served from a block zoo: the base is the zoo's checkpoint variant,
its LoRA adapters and full fine-tunes are loaded from the zoo and decode exactly as
from their folders (HF on each checkpoint); blocks are shared by content hash, so a
block the logit-lens test shared is the base's tensors and a block two fine-tunes
hold alike is held once; each bad zoo is named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from block_testkit import full_finetune
from engine_testkit import check_memory, drive, hf_greedy, random_prompts, save_checkpoint
from lora_testkit import PLANNER, VARIANTS, hf_merged_greedy, random_adapter

from robot_models.blocks.export import export_variant
from timely_core.blocks.zoo import BlockZoo
from timely_core.engine.protocol import AdapterError, SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.loader import CheckpointError

NEW_TOKENS = 12
PARAMS = SamplingParams(max_tokens=NEW_TOKENS)
EARLY = {"embedding", "layers.0.attention", "layers.1.ffn", "norm"}
LATE = {"layers.1.attention", "layers.1.post_attention_norm", "layers.1.ffn", "lm_head"}
CONFIG = EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Checkpoint folders and a zoo holding them all (`zoo`)."""
    root = tmp_path_factory.mktemp("zoo_fleet")
    base = save_checkpoint(root / "base", "llama", seed=11)
    late = full_finetune(base, root / "late", seed=2, blocks=LATE)
    folders = {
        "base": base,
        "lora": random_adapter(base, root / "lora", seed=3),
        "early": full_finetune(base, root / "early", seed=1, blocks=EARLY),
        "late": late,
        # late with one more block changed: late's four blocks are the same content
        "later": full_finetune(late, root / "later", seed=4, blocks={"layers.0.ffn"}),
        # only what acts after the last layer's KV: its KV is the base's
        "head": full_finetune(base, root / "head", seed=5, blocks={"layers.1.ffn", "lm_head"}),
    }
    zoo = BlockZoo(root / "zoo")
    zoo.add("base", base)
    for name, folder in folders.items():
        if name != "base":
            zoo.add(name, folder, "base")
    return {**folders, "zoo": zoo.root}


def _reference(fleet: dict[str, Path], variant: str | None, prompt: list[int]) -> list[int]:
    if variant == "lora":
        return hf_merged_greedy(fleet["base"], fleet["lora"], prompt, NEW_TOKENS)
    return hf_greedy(fleet[variant or "base"], prompt, NEW_TOKENS)


def _zoo_engine(zoo: Path, *variants: str) -> TorchEngine:
    engine = TorchEngine.from_zoo(zoo, "base", CONFIG)
    for name in variants:
        engine.load_zoo_variant(name)
    return engine


def test_zoo_fleet_decodes_as_hf_on_each_checkpoint(fleet: dict[str, Path]) -> None:
    engine = _zoo_engine(fleet["zoo"], "lora", "early", "late")
    folders = TorchEngine(fleet["base"], CONFIG)
    for name in ("lora", "early", "late"):
        folders.load_adapter(name, fleet[name])
    ours, theirs = engine.resident_weights(), folders.resident_weights()
    assert ours.base_bytes == theirs.base_bytes
    assert [(v.name, v.kind, v.nbytes, v.blocks) for v in ours.variants] == [
        (v.name, v.kind, v.nbytes, v.blocks) for v in theirs.variants
    ]
    assert set(ours.variants[2].blocks) == LATE
    assert ours.variants[0].source == str(fleet["zoo"] / "variants" / "lora.json")
    prompts = random_prompts(21, 6, 40)
    variants: list[str | None] = [None, "late", "lora", "early", "late", "lora"]
    got = drive(engine, prompts, PARAMS, [0, 0, 0, 1, 2, 3], variants=variants)
    for prompt, variant, output in zip(prompts, variants, got, strict=True):
        assert output == _reference(fleet, variant, prompt), variant
    check_memory(engine)


def test_a_block_shared_by_the_logit_lens_is_the_bases(
    fleet: dict[str, Path], tmp_path: Path
) -> None:
    """The zoo's sharing decision is served: late's lm_head pointed at the base's is
    the base's very tensor, not held again, and late decodes as its shared export."""
    root = tmp_path / "zoo"
    shutil.copytree(fleet["zoo"], root)
    zoo = BlockZoo(root)
    zoo.share("late", "lm_head", "base")
    engine = _zoo_engine(root, "late")
    late = engine.block_variants["late"]
    assert late.owned == LATE - {"lm_head"}
    assert late.weights.lm_head is engine.model.weights.lm_head
    unshared = _zoo_engine(fleet["zoo"], "late").resident_weights().variants[0].nbytes
    head_bytes = engine.model.weights.lm_head.nbytes
    assert engine.resident_weights().variants[0].nbytes == unshared - head_bytes
    exported = export_variant(zoo, "late", tmp_path / "late-shared")
    prompts = random_prompts(5, 3, 30)
    got = drive(engine, prompts, PARAMS, variants=["late"] * 3)
    for prompt, output in zip(prompts, got, strict=True):
        assert output == hf_greedy(exported, prompt, NEW_TOKENS)
    zoo.share("late", "layers.1.attention", "base")
    zoo.share("late", "layers.1.post_attention_norm", "base")
    zoo.share("late", "layers.1.ffn", "base")
    with pytest.raises(AdapterError, match="every block is the base model's"):
        _zoo_engine(root, "late")


def test_a_block_two_fine_tunes_hold_alike_is_held_once(fleet: dict[str, Path]) -> None:
    engine = _zoo_engine(fleet["zoo"], "late", "later", "head")
    late, later = engine.block_variants["late"], engine.block_variants["later"]
    assert later.owned == LATE | {"layers.0.ffn"}
    assert later.weights.layers[1].qkv is late.weights.layers[1].qkv
    assert later.weights.lm_head is late.weights.lm_head
    assert later.weights.layers[0].gate_up is not engine.model.weights.layers[0].gate_up
    # head shares layers.1.ffn with neither (another fine-tune's content)
    assert engine.block_variants["head"].weights.layers[1].down is not late.weights.layers[1].down
    reports = {v.name: v for v in engine.resident_weights().variants}
    ffn0 = sum(t.nbytes for t in later.block_tensors("layers.0.ffn"))
    assert reports["later"].nbytes == ffn0  # what loading it added beside late
    assert set(reports["later"].blocks) == later.owned
    assert not reports["late"].base_kv and not reports["later"].base_kv
    assert reports["head"].base_kv
    prompts = random_prompts(8, 4, 30)
    variants: list[str | None] = ["later", "late", "head", "later"]
    got = drive(engine, prompts, PARAMS, variants=variants)
    for prompt, variant, output in zip(prompts, variants, got, strict=True):
        assert output == _reference(fleet, variant, prompt), variant
    check_memory(engine)


def test_bad_zoos_and_variants_are_named(fleet: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"block zoo .*nowhere is not a folder"):
        TorchEngine.from_zoo(tmp_path / "nowhere", "base", CONFIG)
    with pytest.raises(CheckpointError, match=r"unknown variant 'ghost' .*variants: base, early"):
        TorchEngine.from_zoo(fleet["zoo"], "ghost", CONFIG)
    with pytest.raises(CheckpointError, match="variant 'lora' is a lora adapter of 'base'"):
        TorchEngine.from_zoo(fleet["zoo"], "lora", CONFIG)
    engine = _zoo_engine(fleet["zoo"], "lora")
    with pytest.raises(AdapterError, match="'lora' is already loaded"):
        engine.load_zoo_variant("lora")
    with pytest.raises(AdapterError, match=r"unknown variant 'ghost'"):
        engine.load_zoo_variant("ghost")
    with pytest.raises(AdapterError, match="give a name other than"):
        engine.load_zoo_variant("base", "early")
    # a variant served under another name, beside the same one under its own
    engine.load_zoo_variant("site-a", "lora")
    assert [v.name for v in engine.resident_weights().variants] == ["lora", "site-a"]
    # a LoRA of another zoo variant than the served base
    served_late = TorchEngine.from_zoo(fleet["zoo"], "late", CONFIG)
    with pytest.raises(AdapterError, match="adapts zoo variant 'base', the engine serves 'late'"):
        served_late.load_zoo_variant("lora")
    folder_engine = TorchEngine(fleet["base"], CONFIG)
    with pytest.raises(AdapterError, match=r"serves the checkpoint folder .*not a block zoo"):
        folder_engine.load_zoo_variant("lora")


def test_missing_and_corrupted_blocks_are_named(fleet: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "zoo"
    shutil.copytree(fleet["zoo"], root)
    zoo = BlockZoo(root)
    early = zoo.manifest("early").block("layers.1.ffn").hash
    zoo.block_path(early).unlink()
    engine = TorchEngine.from_zoo(root, "base", CONFIG)
    with pytest.raises(AdapterError, match=rf"variant 'early' lacks {early}"):
        engine.load_zoo_variant("early")
    embedding = zoo.block_path(zoo.manifest("base").block("embedding").hash)
    content = bytearray(embedding.read_bytes())
    content[-1] ^= 0xFF  # one bit of one weight
    embedding.write_bytes(bytes(content))
    with pytest.raises(CheckpointError, match="corrupted"):
        TorchEngine.from_zoo(root, "base", CONFIG)
    config = zoo.files_dir / zoo.manifest("base").files["config.json"]
    config.unlink()
    with pytest.raises(CheckpointError, match=r"variant 'base' lacks config\.json"):
        TorchEngine.from_zoo(root, "base", CONFIG)


def test_shipped_fleet_from_a_zoo_plans_as_from_its_folders(tmp_path: Path) -> None:
    zoo = BlockZoo(tmp_path / "zoo")
    zoo.add("base", PLANNER)
    names = ("heavy-drone", "lab-arm", "warehouse-drone-full")
    for name in names:
        zoo.add(name, VARIANTS / name, "base")
    engine = TorchEngine.from_zoo(zoo.root, "base", CONFIG)
    folders = TorchEngine(PLANNER, CONFIG)
    for name in names:
        engine.load_zoo_variant(name)
        folders.load_adapter(name, VARIANTS / name)
    assert engine.resident_weights().total_bytes == folders.resident_weights().total_bytes
    assert engine.eos_token_id == folders.eos_token_id
    assert engine.grammars.vocab_size == folders.grammars.vocab_size
    prompt = engine.grammars.encode("Task: fly up 1 meter and land\nPlan:")
    variants: list[str | None] = [None, *names]
    ours = drive(engine, [prompt] * 4, PARAMS, variants=variants)
    assert ours == drive(folders, [prompt] * 4, PARAMS, variants=variants)
    assert len({tuple(o) for o in ours}) > 1  # the variants plan differently
    assert torch.equal(engine.model.weights.embed, folders.model.weights.embed)
