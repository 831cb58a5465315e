"""The fleet served from the block zoo against the same fleet served from its folders
(one run, the planner checkpoint on CPU; issue #25):

1. The shipped base and its 8 variants (7 LoRA adapters, the full fine-tune
   warehouse-drone-full) added to a new zoo: seconds and bytes stored.
2. One torch engine loading the base and all 8, from the folders (`TorchEngine(folder)`
   + `load_adapter`, full fine-tunes compared with the base by value) and from the zoo
   (`TorchEngine.from_zoo` + `load_zoo_variant`, blocks compared by content hash),
   alternated `--rounds` times: load seconds, resident weight bytes against one base.
3. Two full fine-tunes that hold one block alike (the shipped fine-tune, and a copy of
   it with its final norm changed, standing in for a site's second fine-tune of the
   same layers): the folders hold the shared block once per fine-tune, the zoo once.
4. The plans: each variant's greedy plan (no grammar) of its robot type's request,
   zoo-served against folder-served (must be equal; the exit status says).

    PYTHONPATH=. .venv/bin/python bench/zoo_serving.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.language import load_language
from robot_models.variants.spec import variant_spec
from timely_core.blocks.zoo import BlockZoo
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.serving.robots import encode_prefix, encode_request

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord

RESULTS = Path(__file__).resolve().parent / "results" / "zoo_serving.json"
KV = EngineConfig(device_kv_bytes=2**25, host_kv_bytes=0)
PLANNER = default_planner_path()
VARIANTS = PLANNER.parent / "variants"
FULL = "warehouse-drone-full"
SECOND = "warehouse-drone-full-b"  # the fine-tune's copy with its final norm changed
REQUESTS = {
    "drone": ("visible: door, rack", "Fly up 1 meter, then find my wallet"),
    "arm": ("on table: cup, pen, paper", "Put the cup on the tray"),
}


def _fleet() -> list[str]:
    return sorted(p.name for p in VARIANTS.iterdir() if (p / "eval.json").is_file())


def _second_finetune(out: Path) -> Path:
    """The shipped full fine-tune with its final norm scaled by 1.01."""
    shutil.copytree(VARIANTS / FULL, out)
    tensors = load_file(str(out / "model.safetensors"))
    tensors["model.norm.weight"] = tensors["model.norm.weight"] * 1.01
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def build_zoo(root: Path, folders: dict[str, Path]) -> dict[str, Any]:
    started = time.perf_counter()
    zoo = BlockZoo(root)
    zoo.add("base", PLANNER)
    for name, folder in folders.items():
        zoo.add(name, folder, "base")
    seconds = time.perf_counter() - started
    stored = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    added = sum(p.stat().st_size for f in (PLANNER, *folders.values()) for p in f.iterdir())
    return {"seconds": seconds, "stored_bytes": stored, "folders_bytes": added}


def _from_folders(folders: dict[str, Path], names: list[str]) -> TorchEngine:
    engine = TorchEngine(PLANNER, KV)
    for name in names:
        engine.load_adapter(name, folders[name])
    return engine


def _from_zoo(zoo: Path, names: list[str]) -> TorchEngine:
    engine = TorchEngine.from_zoo(zoo, "base", KV)
    for name in names:
        engine.load_zoo_variant(name)
    return engine


def _weights(engine: TorchEngine) -> dict[str, Any]:
    weights = engine.resident_weights()
    return {
        "base_bytes": weights.base_bytes,
        "variant_bytes": {v.name: v.nbytes for v in weights.variants},
        "total_bytes": weights.total_bytes,
        "vs_base": weights.total_bytes / weights.base_bytes,
    }


def load_times(
    folders: dict[str, Path], zoo: Path, names: list[str], rounds: int
) -> dict[str, Any]:
    seconds: dict[str, list[float]] = {"folders": [], "zoo": []}
    for _ in range(rounds):
        started = time.perf_counter()
        _from_folders(folders, names)
        seconds["folders"].append(time.perf_counter() - started)
        started = time.perf_counter()
        _from_zoo(zoo, names)
        seconds["zoo"].append(time.perf_counter() - started)
    return {how: statistics.median(times) for how, times in seconds.items()}


def _plan(engine: TorchEngine, tokenizer: Tokenizer, variant: str | None, robot: str) -> str:
    language = load_language(robot)
    scene, instruction = REQUESTS[robot]
    prompt = encode_prefix(tokenizer, language.prompt_prefix()) + encode_request(
        tokenizer, language.format_request(scene, instruction)
    )
    engine.add(0, prompt, SamplingParams(max_tokens=96), variant=variant)
    ids: list[int] = []
    finished = False
    while not finished:
        (out,) = engine.step([0])
        ids.append(out.token_id)
        finished = out.finished
    return str(tokenizer.decode([i for i in ids if i != engine.eos_token_id]))


def _robot_type(folder: Path) -> str:
    """The robot type its eval.json's fleet variant was trained for."""
    return variant_spec(json.loads((folder / "eval.json").read_text())["variant"]).robot_type


def plans(
    folders_engine: TorchEngine, zoo_engine: TorchEngine, folders: dict[str, Path]
) -> dict[str, Any]:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    rows = {}
    for name in [None, *folders]:
        robot = "drone" if name is None else _robot_type(folders[name])
        theirs = _plan(folders_engine, tokenizer, name, robot)
        ours = _plan(zoo_engine, tokenizer, name, robot)
        rows[name or "base"] = {"robot": robot, "plan": ours, "equal": ours == theirs}
    return rows


def _print(result: dict[str, Any]) -> None:
    console = Console()
    zoo = result["zoo"]
    console.print(
        f"zoo of the base, the {len(result['variants'])} shipped variants and 1 made here: "
        f"built in {zoo['seconds']:.2f} s, "
        f"{zoo['stored_bytes']:,} bytes stored for {zoo['folders_bytes']:,} in the folders"
    )
    table = Table(title="one engine: the base and its variants")
    for column in ("served from", "variants", "weight bytes", "x one base", "load s (median)"):
        table.add_column(column, justify="right")
    for key, title in (("fleet", "the shipped 8"), ("two_finetunes", "+ a 2nd fine-tune")):
        for how in ("folders", "zoo"):
            w = result[key][how]
            load = result[key]["load_s"][how]
            names = len(w["variant_bytes"])
            table.add_row(
                f"{how}, {title}",
                str(names),
                f"{w['total_bytes']:,}",
                f"{w['vs_base']:.3f}",
                f"{load:.3f}",
            )
    console.print(table)
    equal = sum(r["equal"] for r in result["plans"].values())
    console.print(f"plans equal, zoo against folders: {equal}/{len(result['plans'])}")
    console.print(MachineRecord.line(result["machine"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    machine = MachineRecord()
    fleet = _fleet()
    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: VARIANTS / name for name in fleet}
        folders[SECOND] = _second_finetune(Path(tmp) / SECOND)
        zoo_root = Path(tmp) / "zoo"
        zoo = build_zoo(zoo_root, folders)
        result: dict[str, Any] = {"variants": fleet, "zoo": zoo}
        for key, names in (("fleet", fleet), ("two_finetunes", [*fleet, SECOND])):
            folder_engine, zoo_engine = _from_folders(folders, names), _from_zoo(zoo_root, names)
            result[key] = {
                "folders": _weights(folder_engine),
                "zoo": _weights(zoo_engine),
                "load_s": load_times(folders, zoo_root, names, args.rounds),
            }
        result["plans"] = plans(folder_engine, zoo_engine, folders)
    result["machine"] = machine.done()
    _print(result)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    Console().print(f"wrote {args.out}")
    return 0 if all(r["equal"] for r in result["plans"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
