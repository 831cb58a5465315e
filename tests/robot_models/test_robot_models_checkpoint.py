"""The committed planner checkpoint under greedy decoding with HF transformers (the
reference implementation): the whole held-out set is scored as by
`python -m robot_models.evaluate`, and the LRTrace tasks must be planned exactly."""

# mypy: disable-error-code="no-untyped-def"

import json

import pytest
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.dataset import LRTRACE_TASKS, build_dataset
from robot_models.prompts import format_request, prompt_prefix

PATH = default_planner_path()


@pytest.fixture(scope="module")
def planner():
    from robot_models.reference_planner import ReferencePlanner

    return ReferencePlanner(PATH)


def test_checkpoint_files_and_config():
    names = {p.name for p in PATH.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "generation_config.json",
        "MODEL_CARD.md",
    } <= names
    size = sum(p.stat().st_size for p in PATH.iterdir())
    assert size <= 50 * 1024 * 1024
    config = json.loads((PATH / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert config["num_key_value_heads"] < config["num_attention_heads"]  # GQA
    tokenizer = Tokenizer.from_file(str(PATH / "tokenizer.json"))
    assert config["eos_token_id"] == tokenizer.token_to_id("<eos>")
    generation = json.loads((PATH / "generation_config.json").read_text())
    assert generation["eos_token_id"] == config["eos_token_id"]
    assert config["vocab_size"] == tokenizer.get_vocab_size()


def test_prefixes_are_at_least_1000_tokens_and_every_example_fits():
    tokenizer = Tokenizer.from_file(str(PATH / "tokenizer.json"))
    config = json.loads((PATH / "config.json").read_text())
    prefix = {t: len(tokenizer.encode(prompt_prefix(t)).ids) for t in ("drone", "arm")}
    assert min(prefix.values()) >= 1000
    data = build_dataset()
    for example in (*data.train, *data.heldout, *data.lrtrace):
        request = tokenizer.encode(format_request(example.scene, example.instruction)).ids
        plan = tokenizer.encode(example.plan).ids
        total = prefix[example.robot_type] + len(request) + len(plan) + 1
        assert total <= config["max_position_embeddings"], example


def test_plan_lengths_are_as_in_the_paper():
    tokenizer = Tokenizer.from_file(str(PATH / "tokenizer.json"))
    drone = [
        len(tokenizer.encode(t.golden_plan).ids) for t in LRTRACE_TASKS if t.robot_type == "drone"
    ]
    arm = [len(tokenizer.encode(t.golden_plan).ids) for t in LRTRACE_TASKS if t.robot_type == "arm"]
    assert 10 <= sum(drone) / len(drone) <= 30
    assert 60 <= sum(arm) / len(arm) <= 130


@pytest.fixture(scope="module")
def lrtrace_plans(planner):
    plans = {}
    for robot_type in ("drone", "arm"):
        tasks = [t for t in LRTRACE_TASKS if t.robot_type == robot_type]
        got = planner.plan_batch(robot_type, [(t.scene, t.instruction) for t in tasks])
        plans.update({t.trace_id: plan for t, plan in zip(tasks, got, strict=True)})
    return plans


@pytest.mark.slow
@pytest.mark.parametrize("task", LRTRACE_TASKS, ids=lambda t: f"trace{t.trace_id}")
def test_lrtrace_tasks_are_planned_exactly(lrtrace_plans, task):
    plan, ended = lrtrace_plans[task.trace_id]
    assert ended, "the model must end the plan with EOS"
    assert plan == task.golden_plan


# The goals: 99.5% valid plans (issue #22), 100% right-robot skills. Without the
# grammar, HF greedy, the committed checkpoint has 99.7% (299/300) and 99.7% (310/311:
# its one invalid plan garbles a number into a call of `l`), see MODEL_CARD.md; with
# the grammar, the service's default, every plan uses only its robot's skills
# (test_serving_grammar.py). Both floors leave two plans of room for float
# differences between CPUs.
VALID_FLOOR = 0.99
RIGHT_SKILL_FLOOR = 0.99


@pytest.mark.slow
def test_checkpoint_on_the_whole_heldout_set(planner):
    from robot_models.evaluate import evaluate

    data = build_dataset()
    report = evaluate(planner, data.heldout, data.lrtrace)
    assert report.heldout_total == len(data.heldout) >= 300
    assert report.valid_rate >= VALID_FLOOR, report.failures
    assert report.right_skill_rate >= RIGHT_SKILL_FLOOR, report.failures
    assert report.lrtrace_exact == report.lrtrace_total, report.failures


@pytest.mark.slow
def test_batched_decoding_equals_one_at_a_time(planner, lrtrace_plans):
    for task in LRTRACE_TASKS[:2] + LRTRACE_TASKS[-1:]:
        assert (
            planner.plan(task.robot_type, task.scene, task.instruction)
            == lrtrace_plans[task.trace_id]
        )


@pytest.mark.slow
def test_prefix_cache_reuse_equals_full_prompt_greedy(planner):
    import torch

    task = LRTRACE_TASKS[0]
    ids = planner.prompt_ids(task.robot_type, task.scene, task.instruction)
    inputs = torch.tensor([ids])
    with torch.no_grad():
        full = planner.model.generate(
            inputs,
            attention_mask=torch.ones_like(inputs),
            max_new_tokens=40,
            do_sample=False,
            eos_token_id=planner.eos_id,
            pad_token_id=planner.pad_id,
        )
    assert full[0, len(ids) :].tolist() == planner.generate_ids(
        task.robot_type, task.scene, task.instruction, 40
    )


def test_the_training_recipe_reproduces_the_shipped_tokenizer():
    """lrtrace rebuilds the tokenizer this way when no checkpoint is installed, so its
    simulated token counts are the planner's only if the recipe is the checkpoint's."""
    from robot_models.training.loop import TrainConfig, training_data, training_tokenizer

    recipe = TrainConfig()
    rebuilt = training_tokenizer(
        training_data(recipe), recipe.numbers, recipe.words, recipe.vocab_size
    )
    shipped = Tokenizer.from_file(str(default_planner_path() / "tokenizer.json"))
    assert rebuilt.to_str() == shipped.to_str()
