"""Adapter shapes per fleet variant (one run; issue #25): each variant's LoRA trained
in each candidate shape with the same settings (`python -m robot_models.variants.train
NAME --rank R --targets T --layers L --steps N`, its other settings fleet.yaml's),
scored base vs adapter on the variant's 60 held-out examples (HF greedy, exact and
valid plans), and loaded into the torch engine for what serving it costs: its bytes
(engine dtype) and whether it writes the base's KV (then its robots share the base's
cached prompt prefix and decode attention reads one prefix for both).

Shapes (name: targets, layers, rank):
- `qvo-r4`: q, v, o of every layer, rank 4 (the shipped shape);
- `last-r4`: q, o, gate, up, down of the last layer only, rank 4 (its KV is the base's);
- `last-r2`: the same at rank 2.

    PYTHONPATH=. .venv/bin/python bench/adapter_shapes.py [NAME ...] [--steps 240]
        [--shapes qvo-r4,last-r4,last-r2] [--heavy-steps 1200]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from robot_models.checkpoints import default_planner_path
from robot_models.variants.spec import load_fleet
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord

RESULTS = Path(__file__).resolve().parent / "results" / "adapter_shapes.json"
REPO = Path(__file__).resolve().parents[1]
SHAPES = {  # name -> (targets, layers ("" all), rank)
    "qvo-r4": ("q_proj,v_proj,o_proj", "", 4),
    "last-r4": ("q_proj,o_proj,gate_proj,up_proj,down_proj", "3", 4),
    "last-r2": ("q_proj,o_proj,gate_proj,up_proj,down_proj", "3", 2),
}
# variants whose plans differ most from the base's train longer (fleet.yaml: 1,200)
LONG = {"heavy-drone"}


def train(name: str, shape: str, steps: int, out_root: Path) -> dict[str, Any]:
    targets, layers, rank = SHAPES[shape]
    command = [sys.executable, "-m", "robot_models.variants.train", name]
    command += ["--targets", targets, "--rank", str(rank), "--alpha", str(2 * rank)]
    # every shape flag given, "" layers included (every layer): fleet.yaml's shape for
    # the variant must not fill in what a shape leaves out
    command += ["--layers", layers, "--steps", str(steps), "--out-root", str(out_root)]
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=REPO, env={"PYTHONPATH": str(REPO)} | _env())
    seconds = time.perf_counter() - started
    folder = out_root / name
    evaluation = json.loads((folder / "eval.json").read_text())
    stats = json.loads((folder / "train_stats.json").read_text())
    engine = TorchEngine(default_planner_path(), EngineConfig(device_kv_bytes=2**22))
    engine.load_adapter(name, folder)
    (resident,) = engine.resident_weights().variants
    return {
        "variant": name,
        "shape": shape,
        "steps": steps,
        "base_exact": evaluation["base"]["exact"],
        "exact": evaluation["adapter"]["exact"],
        "base_valid": evaluation["base"]["valid"],
        "valid": evaluation["adapter"]["valid"],
        "final_loss": stats["final_loss"],
        "train_s": stats["train_seconds"],
        "command_s": seconds,
        "engine_bytes": resident.nbytes,
        "base_kv": resident.base_kv,
    }


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="variants (default: every LoRA variant)")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--steps", type=int, default=240)
    parser.add_argument("--heavy-steps", type=int, default=1200, help=f"for {sorted(LONG)}")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        parser.error(f"--shapes: unknown {unknown[0]!r}; choose from {', '.join(SHAPES)}")
    names = args.names or list(load_fleet())
    machine = MachineRecord()
    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {"shapes": SHAPES, "rows": rows, "complete": False}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for shape in shapes:
                steps = args.heavy_steps if name in LONG else args.steps
                rows.append(train(name, shape, steps, Path(tmp) / shape))
                result["machine"] = machine.done()  # what is done so far, kept if stopped
                args.out.write_text(json.dumps(result, indent=2) + "\n")
    result["complete"] = True
    _print(result)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    Console().print(f"wrote {args.out}")
    return 0


def _print(result: dict[str, Any]) -> None:
    table = Table(title="adapter shapes: held-out exact (valid) of 60, base -> adapter")
    columns = ("variant", "shape", "steps", "base", "adapter", "engine bytes", "base KV")
    for column in (*columns, "train s"):
        table.add_column(column, justify="right")
    for row in result["rows"]:
        table.add_row(
            row["variant"],
            row["shape"],
            str(row["steps"]),
            f"{row['base_exact']} ({row['base_valid']})",
            f"{row['exact']} ({row['valid']})",
            f"{row['engine_bytes']:,}",
            "yes" if row["base_kv"] else "no",
            f"{row['train_s']:.0f}",
        )
    Console(width=120).print(table)
    Console().print(MachineRecord.line(result["machine"]))


if __name__ == "__main__":
    raise SystemExit(main())
