"""MODEL_CARD.md of the planner checkpoint, written from the recorded figures
(train_stats.json from training, eval.json from `evaluate --update-card`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from robot_models.training.model_card_natural import natural_section

CARD = """# Timely planner (tiny Llama)

The embedded default planner of Timely: a small causal LM in the Hugging Face Llama
format, trained from scratch on templated robot tasks, for both robot types (the
prompt names the robot type). It exists so that the service, its tests and demos run
a real model offline; it is not a general-purpose language model.

## Files
- `config.json` (`model_type: llama`, {layers} layers, hidden {hidden}, {heads} attention
  heads with {kv_heads} key/value heads (grouped-query attention), max {max_pos} positions)
- `model.safetensors` (float32, {params:,} parameters{tied})
- `tokenizer.json`: byte-level BPE from `tokenizers`, {vocab} tokens; {numbers} \
`<eos>` = id {eos}, `<pad>` = id {pad}; no BOS token.
- `generation_config.json` (greedy, EOS as above)

## Prompt and tokenization contract
```
ids = encode(prompt_prefix(robot_type))          # robot_models.prompts, >= 1,000 tokens
    + encode(format_request(scene, instruction)) # "### Request\\nScene: ...\\nTask: ...\\nPlan:\\n"
    + encode(plan) + [eos]
```
Each part is encoded on its own with `tokenizer.json` (no special tokens added) and
the ids are concatenated; the model emits `<eos>` right after the plan. Prefix
lengths: drone {prefix_drone} tokens, arm {prefix_arm} tokens. Plans are in the
Timely plan language (`robot_models/plan_ast.py`).

## Data
`robot_models.dataset`, seed {seed}: {train} generated training examples (drone and
arm templates: search, inspection, urgent avoidance, motion, shapes; desk cleaning,
fruit/vegetable sorting, stacking, pick and place, hand-over, ...; with `--data mixed`
as many again from the open-lexicon request grammar, and with `--observations` a share
shown with a failure observed and the recovery after it) plus the 11 LRTrace tasks
(oversampled), and {heldout} held-out examples never seen in training (by the
tokenizer either). The figures are the last stage's.

## Training

`python -m robot_models.train` with no training option runs these stages in order
(`robot_models/training/recipe.py`), each from the one before:

{stages}

{curriculum}The shared prefix is run once per batch and its K/V expanded over the
batch; loss on plan tokens and EOS only; AdamW with a cosine schedule; {threads} CPU
threads. Measured wall time: **{train_minutes:.1f} minutes** in total on the 2-core CPU
({load}). Final training loss {final_loss:.4f}.

## Evaluation (greedy decoding, HF transformers `LlamaForCausalLM.generate`)
{evaluation}

`python -m robot_models.evaluate` reproduces these figures.

## Limits
Plans are only as good as the templates: the model handles the task families and
vocabulary of `robot_models/dataset`, and produces a valid but possibly wrong plan
for instructions far from them{natural_limit}. {invalid}The serving side rejects invalid plans
statement by statement (the robot only ever gets valid ones).
"""

# What invalid plans of earlier runs in each format mostly were (robot_models/README.md)
DIGIT_SLIPS = """Runs with plain digits mostly slip in copying a number
digit by digit (`mr(747)` for "74 cm") or derail in a long arm plan. """
NUMBER_SLIPS = """Runs with whole-number tokens mostly copy a rarely seen
number wrongly (`tu(425)` for "175 degrees") or derail in a long arm plan. """
NUMBER_TOKENS = """every whole number
  from 0 to 999 is one token (longer digit runs: chunks of up to three digits), so a
  plan copies a number from the instruction as one token."""
DIGIT_TOKENS = """digits are split
  into single-digit tokens."""
PLACE_TOKENS = """every digit is one
  token marked with its place ("436" is hundreds 4, tens 3, units 6: the normalizer
  inserts the marks, control characters the decoder removes), so a copied number says
  with its first token how many digits it has."""
TIED = """; the output layer was trained tied to
  the input embeddings and is saved as an equal copy, so any Llama loader reads it"""


def write_model_card(directory: Path, evaluation: dict[str, Any] | None = None) -> None:
    stats = json.loads((directory / "train_stats.json").read_text())
    config = json.loads((directory / "config.json").read_text())
    run = stats["config"]
    if evaluation is None:
        text = "Not evaluated yet: run `python -m robot_models.evaluate --update-card`."
    else:
        e = evaluation
        rows = [
            (
                "valid plans, held-out",
                f"{e['heldout_valid']}/{e['heldout_total']} ({100 * e['valid_rate']:.1f}%)",
                ">= 99.5%",
            ),
            ("exact match, held-out", f"{e['heldout_exact']}/{e['heldout_total']}", "-"),
            ("exact match, LRTrace tasks", f"{e['lrtrace_exact']}/{e['lrtrace_total']}", "11/11"),
            (
                "right-robot skills",
                f"{e['right_skill']}/{e['right_skill_total']} ({100 * e['right_skill_rate']:.1f}%)",
                "100%",
            ),
        ]
        text = "| metric | value | goal |\n|---|---|---|\n" + "\n".join(
            f"| {name} | {value} | {goal} |" for name, value, goal in rows
        )
        text += natural_section(e)
    numbers, slips = _NUMBERS[_number_format(run)]
    stages_all = [*stats.get("earlier_stages", []), stats]
    lines = []
    for number, stage in enumerate(stages_all, start=1):
        c = stage["config"]
        flags = _flags(c, number)
        lines.append(
            f"{number}. `python -m robot_models.train{flags}`: "
            f"{int(stage.get('steps_done', c['steps']))} of {c['steps']} scheduled steps, "
            f"{stage['train_seconds'] / 60:.1f} minutes, final loss {stage['final_loss']:.4f}"
        )
    card = CARD.format(
        stages="\n".join(lines),
        curriculum=_curriculum(run),
        load=_load(stages_all),
        layers=config["num_hidden_layers"],
        hidden=config["hidden_size"],
        heads=config["num_attention_heads"],
        kv_heads=config["num_key_value_heads"],
        max_pos=config["max_position_embeddings"],
        params=int(stats["parameters"]),
        tied=TIED if run.get("tie_embeddings") else "",
        numbers=numbers,
        invalid=_invalid(evaluation) + slips,
        vocab=config["vocab_size"],
        eos=config["eos_token_id"],
        pad=config["pad_token_id"],
        prefix_drone=int(stats["prefix_tokens_drone"]),
        prefix_arm=int(stats["prefix_tokens_arm"]),
        seed=run["seed"],
        train=int(stats["train_examples"]),
        heldout=int(stats["heldout_examples"]),
        threads=run["threads"],
        train_minutes=sum(stage["train_seconds"] for stage in stages_all) / 60,
        final_loss=stats["final_loss"],
        evaluation=text,
        natural_limit=_natural_limit(evaluation),
    )
    (directory / "MODEL_CARD.md").write_text(card)


_NUMBERS = {
    "place": (PLACE_TOKENS, ""),
    "digits": (DIGIT_TOKENS, DIGIT_SLIPS),
    "whole": (NUMBER_TOKENS, NUMBER_SLIPS),
}


def _natural_limit(evaluation: dict[str, Any] | None) -> str:
    """How the natural set went, in one clause."""
    natural = (evaluation or {}).get("natural") or {}
    plans = sum(t["plans"] for t in natural.values())
    if not plans:
        return ""
    grounded = sum(t["grounded"] for t in natural.values())
    sensible = sum(t["sensible"] for t in natural.values())
    return (
        f" (the hand-written natural set: {grounded} of {plans} plans grounded, {sensible}"
        " sensible, see above)"
    )


def _invalid(evaluation: dict[str, Any] | None) -> str:
    """How many held-out plans were invalid, with the first one as an example."""
    if evaluation is None:
        return ""
    invalid = evaluation["heldout_total"] - evaluation["heldout_valid"]
    text = f"{invalid} of {evaluation['heldout_total']} held-out plans were invalid"
    example = next((f for f in evaluation.get("failures", []) if f.get("error")), None)
    if invalid and example is not None:
        text += f', for example `{example["got"][:80]}` for "{example["instruction"]}"'
    return text + ". "


def _number_format(config: dict[str, Any]) -> str:
    """The run's number format; runs recorded before the option was a choice had a
    `number_tokens` flag (whole numbers) and otherwise plain digits."""
    if "numbers" in config:
        return str(config["numbers"])
    return "whole" if config.get("number_tokens") else "digits"


def _flags(config: dict[str, Any], stage: int) -> str:
    """Command-line options that differ from the defaults (how to rerun the stage)."""
    from robot_models.training.loop import TrainConfig  # loop imports this module

    defaults = asdict(TrainConfig())
    flags = ""
    for name, value in config.items():
        if name == "init_from":
            flags += f" --init-from <stage {stage - 1} output>" if value else ""
        elif name in defaults and value != defaults[name]:
            option = name.replace("_", "-")
            if isinstance(value, bool):
                flags += f" --{option}" if value else f" --no-{option}"
            else:
                flags += f" --{option} {value}"
    return flags


def _curriculum(config: dict[str, Any]) -> str:
    tail = int(config.get("tail_steps", 0))
    if not tail:
        return ""
    tail_lr = full_lr = ""
    if "full_lr" in config:  # runs since each phase has its own schedule
        tail_lr = f", at a peak learning rate of {config['lr']}"
        full_lr = (
            f", at a peak learning rate of {config['full_lr']} (each phase warms up and "
            f"decays on its own)"
        )
    return (
        f"The first {tail} steps see only the last {config['tail_tokens']} tokens of the "
        f"robot's prefix, in batches of {config['tail_batch_size']}{tail_lr} (a short "
        f"context is cheap and is where copying objects and numbers from the request is "
        f"learned); the other {config['steps'] - tail} steps see the full prefix, in "
        f"batches of {config['batch_size']}{full_lr}. Plans that copy numbers from the "
        f"instruction (motion, move_to) are seen twice as often, the 11 LRTrace tasks "
        f"{config['lrtrace_repeats']} times as often. "
    )


def _load(stages: list[dict[str, Any]]) -> str:
    """The machine's load during training: wall time means little without it."""
    loads = [s[k] for s in stages for k in ("load_min", "load_max") if k in s]
    if not loads:
        return "load not recorded"
    return f"1-minute load average {min(loads):.1f} to {max(loads):.1f} during training"
