"""`python -m robot_models.blocks --zoo DIR {add,list,report,export,share}`: the block zoo.

add NAME FOLDER [--base VARIANT]   a checkpoint (model.safetensors) or a peft LoRA
                                   adapter (needs --base: the variant it adapts)
list                               variants, their kind, base and blocks
report [--json]                    bytes stored vs the sum of the checkpoints; exits 2
                                   naming any variant whose blocks or files are gone
export NAME OUT                    reassemble the variant's folder (a new or empty
                                   folder outside the zoo)
share NAME --base B --fleet-variant V   logit-lens test and lazy sharing
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict
from pathlib import Path

from robot_models.blocks.export import export_variant
from robot_models.blocks.report import zoo_report
from robot_models.training.options import OptionError, at_least, check_output_file
from timely_core.blocks.zoo import BlockZoo, BlockZooError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m robot_models.blocks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--zoo", type=Path, required=True, help="the zoo's folder")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add a checkpoint or LoRA adapter as a variant")
    add.add_argument("name")
    add.add_argument("folder", type=Path)
    add.add_argument("--base", help="the variant this one derives from (needed for LoRA)")
    commands.add_parser("list", help="the variants")
    report = commands.add_parser("report", help="bytes stored vs the checkpoints")
    report.add_argument("--json", action="store_true")
    export = commands.add_parser("export", help="write a variant's folder")
    export.add_argument("name")
    export.add_argument("out", type=Path)
    share = commands.add_parser("share", help="logit-lens test and lazy sharing")
    share.add_argument("name")
    share.add_argument("--base", required=True)
    share.add_argument("--fleet-variant", required=True, help="its data (fleet.yaml)")
    share.add_argument("--threshold", type=float, default=0.98)
    share.add_argument("--tolerance", type=int, default=0, help="plans of quality to give")
    share.add_argument("--calibration", type=int, default=16, help="calibration prompts")
    share.add_argument("--json", type=Path, help="also write the decisions here")
    return parser


def check_share_options(args: argparse.Namespace) -> None:
    """Refuse what would only fail (or try every block, with nan) after the minutes of
    scoring that sharing takes."""
    if not math.isfinite(args.threshold):
        raise OptionError("threshold", f"must be a finite number, got {args.threshold}")
    at_least("tolerance", args.tolerance, 0)
    at_least("calibration", args.calibration, 1)
    if args.json is not None:
        check_output_file(args.json, "json")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "share":
        try:
            check_share_options(args)
        except OptionError as error:
            parser.error(error.cli_message())
    zoo = BlockZoo(args.zoo)
    try:
        zoo.check_root()
        if args.command == "add":
            result = zoo.add(args.name, args.folder, args.base)
            print(
                f"{result.name}: {result.blocks} blocks, {result.new_blocks} new "
                f"({result.new_bytes:,} bytes written)"
            )
        elif args.command == "list":
            for name in zoo.variants():
                m = zoo.manifest(name)
                shared = f", {len(m.shared_blocks)} shared" if m.shared_blocks else ""
                print(f"{name}\t{m.kind}\tbase={m.base or '-'}\t{len(m.blocks)} blocks{shared}")
        elif args.command == "report":
            report = zoo_report(zoo)
            if args.json:
                print(json.dumps({**asdict(report), "ratio": report.ratio}, indent=2))
            else:
                print("variant\tkind\tbase\tblocks\tshared\tcheckpoint bytes\town bytes")
                for v in report.variants:
                    print(
                        f"{v.name}\t{v.kind}\t{v.base or '-'}\t{v.blocks}\t{v.shared_blocks}\t"
                        f"{v.checkpoint_bytes:,}\t{v.own_bytes:,}"
                    )
                print(
                    f"checkpoints {report.checkpoints_bytes:,} bytes, zoo stores "
                    f"{report.stored_bytes:,} ({report.ratio:.3f}x); distinct blocks in use "
                    f"{report.resident_bytes:,} tensor bytes"
                )
            for v in report.incomplete:
                more = f" and {len(v.missing) - 1} more" if len(v.missing) > 1 else ""
                print(
                    f"error: variant {v.name!r} lacks {v.missing[0]}{more} in zoo {zoo.root} "
                    "(it cannot be exported or served; adding the checkpoints it was made from "
                    "again, under any name, stores their blocks and files again)",
                    file=sys.stderr,
                )
            if report.incomplete:
                return 2
        elif args.command == "share":
            from robot_models.blocks.share_fleet import (
                result_record,
                result_table,
                share_fleet_variant,
            )

            decided = share_fleet_variant(
                zoo,
                args.name,
                args.base,
                args.fleet_variant,
                args.threshold,
                args.tolerance,
                args.calibration,
            )
            print(result_table(decided))
            if args.json:
                args.json.write_text(json.dumps(result_record(decided), indent=2) + "\n")
        else:
            print(export_variant(zoo, args.name, args.out))
    except BlockZooError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
