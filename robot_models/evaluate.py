"""`python -m robot_models.evaluate`: score a planner checkpoint with greedy decoding.

Decodes with HF transformers `LlamaForCausalLM.generate` (the reference
implementation), in batches of one robot type sharing the prefix KV cache.
Prints, side by side, the template held-out set (valid, goal >= 99%), the 11 LRTrace
tasks (exact, goal 11/11) and the hand-written natural set (`data/natural_eval.yaml`:
valid, right-robot skills, grounded, sensible), the held-out set by plan family
(`--heldout frames` shows how the planner does on the open-lexicon request
grammar's families), the rate of plans that use only skills of the right robot
type on held-out and LRTrace (goal 100%), and writes them as JSON. Figures with
the plan grammar come from the serving engine (`bench/natural_eval.py`);
`--engine-figures` adds its JSON to the model card. Every option is checked before
the data is built: a bad one is refused in one line naming it.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from rich.console import Console
from rich.table import Table

from robot_models.checkpoints import default_planner_path
from robot_models.dataset import DEFAULT_SEED, Example, build_dataset
from robot_models.dataset.build import GENERATORS, Generator, check_generator
from robot_models.natural_eval import NaturalEntry, natural_eval
from robot_models.natural_score import NaturalTally, score_plan
from robot_models.plan_check import check_plan
from robot_models.reference_planner import ReferencePlanner
from robot_models.training.model_card import write_model_card
from robot_models.training.options import (
    OptionError,
    check_output_dir,
    check_output_file,
    read_checkpoint,
    read_json_file,
)

BATCH_SIZE = 16
NATURAL_CRITERIA = ("valid", "right_skills", "grounded", "sensible")


@dataclass
class FamilyTally:
    """One plan family of the held-out set: plans, valid, exact."""

    plans: int = 0
    valid: int = 0
    exact: int = 0

    def add(self, valid: bool, exact: bool) -> None:
        self.plans += 1
        self.valid += valid
        self.exact += exact


@dataclass
class EvalReport:
    heldout_total: int = 0
    heldout_valid: int = 0
    heldout_exact: int = 0
    right_skill: int = 0  # over held-out and LRTrace plans
    right_skill_total: int = 0
    lrtrace_exact: int = 0
    lrtrace_total: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)
    natural: dict[str, NaturalTally] = field(default_factory=dict)  # by robot type
    natural_plans: list[dict[str, object]] = field(default_factory=list)
    # the held-out set by plan family (`Example.family`): where the planner falls short
    families: dict[str, FamilyTally] = field(default_factory=dict)
    heldout_name: str = "template held-out"  # whose held-out split was scored

    @property
    def valid_rate(self) -> float:
        return self.heldout_valid / max(1, self.heldout_total)

    @property
    def right_skill_rate(self) -> float:
        return self.right_skill / max(1, self.right_skill_total)

    def meets_goals(self) -> bool:
        return (
            self.valid_rate >= 0.995
            and self.lrtrace_exact == self.lrtrace_total
            and self.right_skill == self.right_skill_total
        )


class BatchPlanner(Protocol):
    """What `evaluate` decodes with (`ReferencePlanner`)."""

    def plan_batch(
        self, robot_type: str, requests: Sequence[tuple[str, str]]
    ) -> list[tuple[str, bool]]: ...


def greedy_plans(planner: BatchPlanner, examples: Sequence[Example]) -> list[tuple[str, bool]]:
    """Plans for `examples`, in order, decoded in batches of one robot type."""
    plans: dict[int, tuple[str, bool]] = {}
    for robot_type in ("drone", "arm"):
        indices = [i for i, e in enumerate(examples) if e.robot_type == robot_type]
        for start in range(0, len(indices), BATCH_SIZE):
            chunk = indices[start : start + BATCH_SIZE]
            requests = [(examples[i].scene, examples[i].instruction) for i in chunk]
            plans.update(zip(chunk, planner.plan_batch(robot_type, requests), strict=True))
    return [plans[i] for i in range(len(examples))]


def natural_examples() -> list[tuple[Example, NaturalEntry]]:
    """The natural set of both robot types, as examples (no golden plan) with their
    annotations."""
    return [
        (Example(robot_type, e.scene, e.instruction, "", "natural"), e)
        for robot_type in ("drone", "arm")
        for e in natural_eval(robot_type)
    ]


def evaluate(
    planner: BatchPlanner,
    heldout: Sequence[Example],
    lrtrace: Sequence[Example],
    natural: Sequence[tuple[Example, NaturalEntry]] = (),
) -> EvalReport:
    """Greedy plans for every example, scored."""
    report = EvalReport()
    started = time.monotonic()
    if natural:
        generated_natural = greedy_plans(planner, [e for e, _ in natural])
        for (example, entry), (text, ended) in zip(natural, generated_natural, strict=True):
            score = score_plan(example.robot_type, entry, text, ended)
            report.natural.setdefault(example.robot_type, NaturalTally()).add(score)
            report.natural_plans.append(
                {
                    "robot_type": example.robot_type,
                    "instruction": example.instruction,
                    "plan": text,
                    "ended": ended,
                    **{c: getattr(score, c) for c in NATURAL_CRITERIA},
                    "problems": list(score.problems),
                }
            )
    labelled = [(e, False) for e in heldout] + [(e, True) for e in lrtrace]
    generated = greedy_plans(planner, [e for e, _ in labelled])
    for (example, is_lrtrace), (text, ended) in zip(labelled, generated, strict=True):
        check = check_plan(example.robot_type, text, ended)
        exact = ended and text == example.plan
        report.right_skill_total += 1
        report.right_skill += check.right_skills
        if is_lrtrace:
            report.lrtrace_total += 1
            report.lrtrace_exact += exact
        else:
            report.heldout_total += 1
            report.heldout_valid += check.valid
            report.heldout_exact += exact
            report.families.setdefault(example.family, FamilyTally()).add(check.valid, exact)
        if not check.valid or not check.right_skills or (is_lrtrace and not exact):
            report.failures.append(
                {
                    "set": "lrtrace" if is_lrtrace else "heldout",
                    "right_skills": check.right_skills,
                    "instruction": example.instruction,
                    "expected": example.plan,
                    "got": text,
                    "error": check.error,
                }
            )
    report.seconds = time.monotonic() - started
    return report


def natural_total(report: EvalReport) -> NaturalTally:
    total = NaturalTally()
    for tally in report.natural.values():
        total = total.merged(tally)
    return total


def _share(count: int, total: int) -> str:
    return f"{count}/{total} ({100 * count / max(1, total):.1f}%)"


def print_sets(report: EvalReport, console: Console) -> None:
    """The three sets side by side (HF greedy, no grammar)."""
    table = Table(title="Sets side by side (HF greedy, no grammar)")
    for column in ("set", "plans", "valid", "right skills", "grounded", "sensible", "exact"):
        table.add_column(column, justify="right")
    lrtrace_right = sum(
        1 for f in report.failures if f.get("set") == "lrtrace" and not f.get("right_skills")
    )
    heldout_right = sum(
        1 for f in report.failures if f.get("set") == "heldout" and not f.get("right_skills")
    )
    table.add_row(
        report.heldout_name,
        str(report.heldout_total),
        _share(report.heldout_valid, report.heldout_total),
        _share(report.heldout_total - heldout_right, report.heldout_total),
        "-",
        "-",
        _share(report.heldout_exact, report.heldout_total),
    )
    table.add_row(
        "LRTrace tasks",
        str(report.lrtrace_total),
        "-",
        _share(report.lrtrace_total - lrtrace_right, report.lrtrace_total),
        "-",
        "-",
        _share(report.lrtrace_exact, report.lrtrace_total),
    )
    rows = [(f"natural, {robot}", tally) for robot, tally in report.natural.items()]
    if report.natural:
        rows.append(("natural, both", natural_total(report)))
    for name, tally in rows:
        table.add_row(
            name,
            str(tally.plans),
            *(_share(getattr(tally, c), tally.plans) for c in NATURAL_CRITERIA),
            "-",
        )
    console.print(table)


def print_families(report: EvalReport, console: Console) -> None:
    """The held-out set by plan family, least exact first."""
    table = Table(title="Held-out set by plan family (HF greedy, no grammar)")
    for column in ("family", "plans", "valid", "exact"):
        table.add_column(column, justify="right")
    ranked = sorted(report.families.items(), key=lambda kv: (kv[1].exact / kv[1].plans, kv[0]))
    for name, tally in ranked:
        table.add_row(
            name,
            str(tally.plans),
            _share(tally.valid, tally.plans),
            _share(tally.exact, tally.plans),
        )
    console.print(table)


def print_report(report: EvalReport, console: Console) -> None:
    print_sets(report, console)
    print_families(report, console)
    table = Table(title="Planner checkpoint (greedy decoding)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("goal", justify="right")
    table.add_row(
        "valid plans, held-out",
        f"{report.heldout_valid}/{report.heldout_total} ({100 * report.valid_rate:.1f}%)",
        ">= 99%",
    )
    table.add_row("exact match, held-out", f"{report.heldout_exact}/{report.heldout_total}", "-")
    table.add_row(
        "exact match, LRTrace tasks", f"{report.lrtrace_exact}/{report.lrtrace_total}", "11/11"
    )
    table.add_row(
        "right-robot skills",
        f"{report.right_skill}/{report.right_skill_total} ({100 * report.right_skill_rate:.1f}%)",
        "100%",
    )
    table.add_row("evaluation time", f"{report.seconds:.0f} s", "-")
    console.print(table)
    natural = [p for p in report.natural_plans if not p["sensible"]]
    for plan in natural[:10]:
        console.print(
            f"[yellow]natural[/yellow] {plan['instruction']!r}: got {str(plan['plan'])[:120]!r}"
            f" ({'; '.join(plan['problems'])[:160]})"  # type: ignore[arg-type]
        )
    for failure in report.failures[:10]:
        console.print(
            f"[red]fail[/red] {failure['instruction']!r}: "
            f"got {failure['got'][:160]!r} ({failure['error'][:160]})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:  # every option is checked before data building and decoding start
        engine_figures = _check_options(args)
        generator = args.heldout or trained_generator(args.checkpoint)
        planner = ReferencePlanner(args.checkpoint)
    except OptionError as error:
        parser.error(error.cli_message())
    data = build_dataset(args.seed, generator=generator)
    heldout = data.heldout[: args.limit] if args.limit is not None else data.heldout
    natural = [] if args.no_natural else natural_examples()
    report = evaluate(planner, heldout, data.lrtrace, natural)
    report.heldout_name = f"{'template' if generator == 'templates' else generator} held-out"
    print_report(report, Console())
    figures = {
        **asdict(report),
        "valid_rate": report.valid_rate,
        "right_skill_rate": report.right_skill_rate,
    }
    plans = figures.pop("natural_plans")
    if engine_figures is not None:
        figures["natural_engine"] = engine_figures
    if args.json is not None:
        args.json.write_text(json.dumps({**figures, "natural_plans": plans}, indent=2) + "\n")
    if args.update_card:
        (args.checkpoint / "eval.json").write_text(json.dumps(figures, indent=2) + "\n")
        write_model_card(args.checkpoint, figures)
    return 0 if report.meets_goals() else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", type=Path, default=default_planner_path())
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="data set seed (as in training)"
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        help="evaluate only the first N held-out examples (N >= 1)",
    )
    parser.add_argument(
        "--heldout",
        choices=GENERATORS,
        default=None,
        help="whose held-out split to score (default: the generator the checkpoint was trained on)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--no-natural", action="store_true", help="skip the natural set (data/natural_eval.yaml)"
    )
    parser.add_argument(
        "--engine-figures",
        type=Path,
        default=None,
        help="JSON of bench/natural_eval.py (engine, with and without the grammar) for the card",
    )
    parser.add_argument(
        "--update-card",
        action="store_true",
        help="write the figures to eval.json and MODEL_CARD.md in the checkpoint directory",
    )
    return parser


def positive_int(text: str) -> int:
    """argparse type of a count: an int of at least 1 (0 once meant "all", silently)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _check_options(args: argparse.Namespace) -> object | None:
    """OptionError for an option the run would fail on only after evaluating: the
    checkpoint's files, the outputs' folders, --update-card with a partial run, the
    engine figures' file; returns the engine figures for the card (or None)."""
    read_checkpoint(args.checkpoint, "checkpoint")
    if args.update_card:
        if args.limit is not None or args.no_natural:
            raise OptionError(
                "update_card",
                "needs the full held-out and natural sets (no --limit, no --no-natural)",
            )
        check_output_dir(args.checkpoint, "update_card")
    if args.json is not None:
        check_output_file(args.json, "json")
    if args.engine_figures is None:
        return None
    engine = read_json_file(args.engine_figures, "engine_figures")
    if not isinstance(engine, dict) or "card" not in engine:
        raise OptionError(
            "engine_figures",
            f"{args.engine_figures} has no 'card' figures (bench/natural_eval.py's JSON has)",
        )
    return engine["card"]


def trained_generator(checkpoint: Path) -> Generator:
    """The data generator the checkpoint was trained with (its held-out split is the
    one to score); checkpoints from before the frames generator used the templates.
    OptionError naming the checkpoint if its train_stats.json cannot tell."""
    stats = checkpoint / "train_stats.json"
    if not stats.exists():
        return "templates"
    record = read_json_file(stats, "checkpoint")
    config = record.get("config", {}) if isinstance(record, dict) else None
    if not isinstance(config, dict):
        raise OptionError("checkpoint", f"{stats} is not a training record (no config object)")
    generator = config.get("data", "templates")
    try:
        check_generator(generator)
    except ValueError as error:
        raise OptionError("checkpoint", f"{stats}: {error}") from None
    return cast(Generator, generator)


if __name__ == "__main__":
    raise SystemExit(main())
