"""The block zoo: partition at architectural boundaries, bit-identical reassembly,
storage of each distinct block once, LoRA adapters' per-projection blocks, and the
errors it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from robot_models.blocks.__main__ import main
from robot_models.blocks.export import export_variant
from robot_models.blocks.report import zoo_report
from robot_models.checkpoints import CHECKPOINT_DIR, default_planner_path
from tests.robot_models.blocks_support import planner_copy, tiny_llama
from tests.robot_models.cli_support import refusal
from timely_core.blocks.zoo import BlockZoo, BlockZooError, UnknownVariant

PLANNER = default_planner_path()
ADAPTER = CHECKPOINT_DIR / "variants" / "warehouse-drone"
# one block per adapted projection of each layer (the adapter's own A and B)
ADAPTED = sum("lora_A" in key for key in load_file(str(ADAPTER / "adapter_model.safetensors")))


def _block_files(zoo: BlockZoo) -> set[str]:
    return {p.name for p in zoo.blocks_dir.glob("*.safetensors")}


def test_planner_partitions_and_reassembles_bit_identically(tmp_path: Path) -> None:
    zoo = BlockZoo(tmp_path / "zoo")
    result = zoo.add("base", PLANNER)
    manifest = zoo.manifest("base")
    names = [b.name for b in manifest.blocks]
    assert names[0] == "embedding" and names[-2:] == ["norm", "lm_head"]
    assert names[1:5] == [
        "layers.0.input_norm",
        "layers.0.attention",
        "layers.0.post_attention_norm",
        "layers.0.ffn",
    ]
    assert result.blocks == result.new_blocks == 4 * 4 + 3 == len(_block_files(zoo))
    out = export_variant(zoo, "base", tmp_path / "out")
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        assert (out / name).read_bytes() == (PLANNER / name).read_bytes()


def test_adding_the_base_twice_stores_nothing_new(tmp_path: Path) -> None:
    zoo = BlockZoo(tmp_path / "zoo")
    zoo.add("base", PLANNER)
    before = {p: p.stat().st_size for p in (zoo.root / "blocks").iterdir()}
    again = zoo.add("base-again", PLANNER)
    assert (again.new_blocks, again.new_bytes) == (0, 0)
    assert {p: p.stat().st_size for p in (zoo.root / "blocks").iterdir()} == before
    report = zoo_report(zoo)
    assert report.checkpoints_bytes > 1.9 * report.stored_bytes  # two checkpoints, one copy


def test_changed_layers_store_only_their_blocks(tmp_path: Path) -> None:
    def retrain_layer_3(tensors: dict[str, torch.Tensor]) -> None:
        for name in list(tensors):
            if name.startswith("model.layers.3.self_attn.") or name.startswith(
                "model.layers.3.mlp."
            ):
                tensors[name] = tensors[name] * 1.01

    variant = planner_copy(tmp_path / "tuned", retrain_layer_3)
    zoo = BlockZoo(tmp_path / "zoo")
    zoo.add("base", PLANNER)
    result = zoo.add("tuned", variant, base="base")
    assert result.new_blocks == 2  # layers.3.attention and layers.3.ffn
    base_hashes = {b.name: b.hash for b in zoo.manifest("base").blocks}
    changed = [b.name for b in zoo.manifest("tuned").blocks if b.hash != base_hashes[b.name]]
    assert changed == ["layers.3.attention", "layers.3.ffn"]
    assert (
        export_variant(zoo, "tuned", tmp_path / "out").joinpath("model.safetensors").read_bytes()
        == (variant / "model.safetensors").read_bytes()
    )
    report = {v.name: v for v in zoo_report(zoo).variants}
    tensor_bytes = 4 * (192 * 192 * 2 + 64 * 192 * 2 + 512 * 192 * 3)
    assert report["tuned"].own_bytes == tensor_bytes


def test_tied_embeddings_are_one_block_or_none(tmp_path: Path) -> None:
    zoo = BlockZoo(tmp_path / "zoo")
    zoo.add("copy", tiny_llama(tmp_path / "copy", tied="copy"))
    manifest = zoo.manifest("copy")
    # the equal copy has the embedding's content: stored once, both blocks name it
    assert manifest.block("lm_head").hash == manifest.block("embedding").hash
    assert len(_block_files(zoo)) == len(manifest.blocks) - 1
    zoo.add("absent", tiny_llama(tmp_path / "absent", tied="absent"))
    assert "lm_head" not in [b.name for b in zoo.manifest("absent").blocks]
    for name in ("copy", "absent"):
        out = export_variant(zoo, name, tmp_path / f"out-{name}")
        assert (out / "model.safetensors").read_bytes() == (
            tmp_path / name / "model.safetensors"
        ).read_bytes()


def test_lora_adapter_deltas_are_per_projection_blocks(tmp_path: Path) -> None:
    zoo = BlockZoo(tmp_path / "zoo")
    zoo.add("base", PLANNER)
    before = _block_files(zoo)
    result = zoo.add("warehouse-drone", ADAPTER, base="base")
    manifest = zoo.manifest("warehouse-drone")
    assert manifest.kind == "lora" and manifest.base == "base"
    assert result.blocks == result.new_blocks == ADAPTED > 0
    # warehouse-drone adapts the last layer's q, o and FFN projections
    assert "layers.3.ffn.gate_proj.lora" in [b.name for b in manifest.blocks]
    assert set(zoo.block_tensors(manifest.block("layers.3.attention.q_proj.lora").hash)) == {
        "lora_A.weight",
        "lora_B.weight",
    }
    assert len(_block_files(zoo) - before) == ADAPTED
    out = export_variant(zoo, "warehouse-drone", tmp_path / "out")
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        assert (out / name).read_bytes() == (ADAPTER / name).read_bytes()
    own = {v.name: v.own_bytes for v in zoo_report(zoo).variants}["warehouse-drone"]
    assert own == sum(
        t.numel() * 4 for t in load_file(str(ADAPTER / "adapter_model.safetensors")).values()
    )


def test_bad_input_is_named(tmp_path: Path) -> None:
    zoo = BlockZoo(tmp_path / "zoo")
    with pytest.raises(BlockZooError, match="is not a folder"):
        zoo.add("x", tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BlockZooError, match=r"model\.safetensors is missing"):
        zoo.add("x", tmp_path / "empty")
    with pytest.raises(UnknownVariant, match=r"unknown variant 'ghost' .*\(variants: none\)"):
        export_variant(zoo, "ghost", tmp_path / "out")
    zoo.add("base", PLANNER)
    with pytest.raises(BlockZooError, match="already in zoo"):
        zoo.add("base", PLANNER)
    with pytest.raises(BlockZooError, match="is a LoRA adapter: name the variant it adapts"):
        zoo.add("lora", ADAPTER)
    with pytest.raises(UnknownVariant, match="unknown variant 'nobase'"):
        zoo.add("lora", ADAPTER, base="nobase")
    with pytest.raises(BlockZooError, match="variant name 'bad name'"):
        zoo.add("bad name", PLANNER)
    # an adapter of a wider model
    wide = tmp_path / "wide"
    wide.mkdir()
    (wide / "adapter_config.json").write_text((ADAPTER / "adapter_config.json").read_text())
    factors = load_file(str(ADAPTER / "adapter_model.safetensors"))
    key = "base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"
    factors[key] = torch.zeros(8, 384)
    save_file(factors, str(wide / "adapter_model.safetensors"))
    with pytest.raises(
        BlockZooError,
        match=r"layers.1.self_attn.q_proj.lora_A.weight is \[8, 384\], base 'base' needs "
        r"\[r, 192\] \(model.layers.1.self_attn.q_proj.weight is \[192, 192\]\)",
    ):
        zoo.add("wide", wide, base="base")
    # a checkpoint of another shape over the base
    with pytest.raises(
        BlockZooError,
        match=r"block embedding tensor weight is F32 \[32, 8\], base 'base' has F32 \[1536, 192\]",
    ):
        zoo.add("tiny", tiny_llama(tmp_path / "tiny"), base="base")
    assert zoo.variants() == ["base"]  # nothing half-added


def test_cli_adds_lists_reports_exports_and_names_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    z = ["--zoo", str(tmp_path / "zoo")]
    assert main([*z, "add", "base", str(PLANNER)]) == 0
    assert main([*z, "add", "wd", str(ADAPTER), "--base", "base"]) == 0
    assert main([*z, "list"]) == 0
    assert f"wd\tlora\tbase=base\t{ADAPTED} blocks" in capsys.readouterr().out
    assert main([*z, "report", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["checkpoints_bytes"] == sum(v["checkpoint_bytes"] for v in report["variants"])
    adapter = sum(t.nbytes for t in load_file(str(ADAPTER / "adapter_model.safetensors")).values())
    assert report["resident_bytes"] == 8_657_664 + adapter  # the base's tensors + the adapter's
    assert [v["name"] for v in report["variants"]] == ["base", "wd"]
    assert main([*z, "export", "base", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == (
        PLANNER / "model.safetensors"
    ).read_bytes()
    assert main([*z, "export", "ghost", str(tmp_path / "out2")]) == 2
    assert "error: unknown variant 'ghost'" in capsys.readouterr().err


def test_cli_share_names_an_unknown_fleet_variant_or_zoo_variant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    z = ["--zoo", str(tmp_path / "zoo")]
    assert main([*z, "add", "base", str(PLANNER)]) == 0
    share = ["share", "tuned", "--base", "base", "--fleet-variant"]
    assert main([*z, *share, "tractor"]) == 2
    assert "error: unknown variant 'tractor'; known: heavy-drone" in capsys.readouterr().err
    assert main([*z, *share, "warehouse-drone"]) == 2
    assert "error: unknown variant 'tuned' in zoo" in capsys.readouterr().err


def test_a_zoo_path_that_is_a_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "zoo").write_text("x")
    z = ["--zoo", str(tmp_path / "zoo")]
    for argv in (["list"], ["report"], ["add", "base", str(PLANNER)]):
        assert main([*z, *argv]) == 2
        assert f"error: zoo {tmp_path / 'zoo'} is a file, not a folder" in capsys.readouterr().err


def test_garbage_weights_and_damaged_zoo_are_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    z = ["--zoo", str(tmp_path / "zoo")]
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "model.safetensors").write_text("junk")
    assert main([*z, "add", "g", str(garbage)]) == 2
    assert "model.safetensors is not a safetensors file" in capsys.readouterr().err
    assert main([*z, "add", "base", str(PLANNER)]) == 0
    capsys.readouterr()
    manifest = tmp_path / "zoo" / "variants" / "base.json"
    intact = manifest.read_text()
    manifest.write_text("{bad")
    assert main([*z, "list"]) == 2
    err = capsys.readouterr().err
    assert f"error: manifest {manifest} is damaged (Invalid JSON" in err
    assert len(err.strip().splitlines()) == 1
    manifest.write_text(intact)
    for file in (tmp_path / "zoo" / "files").iterdir():
        file.unlink()
    assert main([*z, "export", "base", str(tmp_path / "out")]) == 2
    assert "of 'base' is missing from the zoo" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing half-exported


def test_export_refuses_the_zoo_a_file_and_a_folder_in_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zoo_dir = tmp_path / "zoo"
    z = ["--zoo", str(zoo_dir)]
    assert main([*z, "add", "base", str(PLANNER)]) == 0
    (tmp_path / "afile").write_text("x")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("mine")
    refused = {
        zoo_dir: "is inside zoo",
        zoo_dir / "sub": "is inside zoo",
        tmp_path / "afile": "exists and is not a folder",
        tmp_path / "afile" / "sub": "is a file",
        tmp_path / "used": "exists and is not empty",
    }
    for out, reason in refused.items():
        assert main([*z, "export", "base", str(out)]) == 2
        assert reason in capsys.readouterr().err
    assert not (zoo_dir / "model.safetensors").exists()
    assert sorted(p.name for p in (tmp_path / "used").iterdir()) == ["keep.txt"]
    (tmp_path / "empty").mkdir()
    assert main([*z, "export", "base", str(tmp_path / "empty")]) == 0
    assert main([*z, "export", "base", str(tmp_path / "new" / "deep")]) == 0


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--threshold", "nan"], "argument --threshold: must be a finite number, got nan"),
        (["--tolerance=-1"], "argument --tolerance: must be at least 0, got -1"),
        (["--calibration", "0"], "argument --calibration: must be at least 1, got 0"),
        (["--json", "/nonexistent-dir/x.json"], "argument --json: cannot write"),
    ],
)
def test_share_refuses_bad_options_before_scoring(
    flags: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--zoo", str(tmp_path / "zoo"), "share", "tuned", "--base", "base"]
    argv += ["--fleet-variant", "warehouse-drone", *flags]
    assert line in refusal(main, argv, capsys)


def test_report_names_a_variant_whose_block_or_file_is_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A block or file deleted from the zoo: the report still prints, then names the
    variants that lack it and exits 2; adding the checkpoint again restores it."""
    z = ["--zoo", str(tmp_path / "zoo")]
    assert main([*z, "add", "base", str(PLANNER)]) == 0
    assert main([*z, "add", "wd", str(ADAPTER), "--base", "base"]) == 0
    assert main([*z, "report"]) == 0
    capsys.readouterr()
    zoo = BlockZoo(tmp_path / "zoo")
    block = zoo.manifest("base").blocks[0].hash
    (zoo.blocks_dir / f"{block}.safetensors").unlink()
    file = next(iter(zoo.manifest("wd").files))
    (zoo.files_dir / zoo.manifest("wd").files[file]).unlink()
    assert main([*z, "report"]) == 2
    out, err = capsys.readouterr()
    assert "checkpoints " in out  # the table still printed
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith(f"error: variant 'base' lacks block {block} in zoo")
    assert lines[1].startswith(f"error: variant 'wd' lacks file {file} in zoo")
    report = {v.name: v for v in zoo_report(zoo).variants}
    assert report["base"].missing == (f"block {block}",)
    assert main([*z, "add", "again", str(PLANNER)]) == 0
    assert main([*z, "add", "wd-again", str(ADAPTER), "--base", "base"]) == 0
    assert main([*z, "report"]) == 0
