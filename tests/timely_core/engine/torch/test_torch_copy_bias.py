"""The copy bias in the torch engine, on the shipped planner under the robots'
grammars: requests naming objects the planner was never trained on get plans that
quote those names, where the same plans without the bias name something else; a
name the request only implies, which the planner is sure of, stays; a free-text
message (`lg`) is left as it was, since only a skill's name argument is biased;
sampled plans with the bias still parse; bad copy parameters are refused by name.
Numbers the request states are copied as the skill's unit wants them ("1.2 m" is
`mu(120)`, where the planner alone writes `mu(101)`). A held object is not pushed
onto itself: the place takes the request's other name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from robot_models.grounding import grounded_names
from robot_models.language import load_language
from robot_models.plan_check import check_plan
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.language.grammar import with_copy_bias

PLANNER = Path(__file__).resolve().parents[4] / "robot_models" / "checkpoints" / "planner"
BIAS = 10.0
# (robot, scene, instruction, a name the plan must quote)
NAMED = [
    ("drone", "visible: table, chairs", "look for my green thermos", "green thermos"),
    ("drone", "visible: kitchen table", "find the salt shaker", "salt shaker"),
    ("drone", "visible: sofa", "where is the hamster", "hamster"),
    ("arm", "on table: stapler, notebook", "put the stapler in the holder", "holder"),
    ("arm", "on table: red mug; places: tray", "is there a red mug on the table", "red mug"),
]
# (robot, instruction, the call the plan must make): amounts in other units and words
VALUED = [
    ("drone", "go up 1.2 m please", "mu(120)"),
    ("drone", "turn left ninety degrees", "tu(90)"),
    ("drone", "fly right 1.5 m", "mr(150)"),
    ("drone", "wait 4 seconds then land", "dl(4)"),
    ("arm", "move the gripper to x 55 cm, y -10 cm, z 35 cm", "mt(550,-100,350)"),
    ("arm", "go to (0.6, 0.1, 0.2) m", "mt(600,100,200)"),
]
# (scene, instruction, the held object, where the request puts it): the arm
PLACED = [
    ("on table: trowel, crate", "put the trowel in the crate", "trowel", "crate"),
    (
        "on table: red block, blue block",
        "stack the red block onto the blue block",
        "red block",
        "blue block",
    ),
]
IMPLIED = ("drone", "visible: desk, chair", "Find a tool for cutting paper", "scissors")
# the planner answers with a message (`lg('cannot ...')`), not a name
MESSAGE = ("drone", "visible: sofa, carpet", "vacuum the carpet")

pytestmark = pytest.mark.slow


class Planner:
    def __init__(self) -> None:
        self.tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
        self.languages = {r: load_language(r) for r in ("drone", "arm")}
        self.engine = TorchEngine(PLANNER, EngineConfig(num_threads=1))
        self._next = 0

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def params(
        self, robot: str, scene: str, instruction: str, bias: float, openers: bool = True
    ) -> SamplingParams:
        language = self.languages[robot]
        return SamplingParams(
            max_tokens=160,
            grammar=language.grammar(),
            copy_names=grounded_names(scene, instruction),
            copy_bias=bias,
            copy_openers=language.name_openers() if openers else (),
        )

    def plan(self, robot: str, scene: str, instruction: str, params: SamplingParams) -> str:
        language = self.languages[robot]
        prompt = self.encode(language.prompt_prefix() + language.format_request(scene, instruction))
        gen_id, self._next = self._next, self._next + 1
        self.engine.add(gen_id, prompt, params)
        ids: list[int] = []
        while True:
            (out,) = self.engine.step([gen_id])
            ids.append(out.token_id)
            if out.finished:
                text = self.tokenizer.decode(ids)
                assert check_plan(robot, text, True).valid, text
                return text


@pytest.fixture(scope="module")
def planner() -> Planner:
    return Planner()


def test_plans_quote_the_names_the_request_gives(planner: Planner) -> None:
    copied = 0
    for robot, scene, instruction, name in NAMED:
        with_bias = planner.plan(
            robot, scene, instruction, planner.params(robot, scene, instruction, BIAS)
        )
        without = planner.plan(
            robot, scene, instruction, planner.params(robot, scene, instruction, 0.0)
        )
        assert f"'{name}'" in with_bias, (instruction, with_bias)
        copied += f"'{name}'" not in without
    assert copied >= 3  # what the bias is for: without it these plans name something else


def test_plans_write_the_numbers_the_request_states(planner: Planner) -> None:
    copied = 0
    for robot, instruction, call in VALUED:
        plain = replace(planner.params(robot, "", instruction, 0.0), copy_names=())
        biased = with_copy_bias(plain, planner.languages[robot], "", instruction, BIAS)
        assert biased.copy_values, instruction
        with_bias = planner.plan(robot, "", instruction, biased)
        assert call in with_bias, (instruction, with_bias)
        copied += call not in planner.plan(robot, "", instruction, plain)
    assert copied >= 4  # without it the planner writes other numbers


def test_a_held_object_is_not_pushed_onto_itself(planner: Planner) -> None:
    arm = planner.languages["arm"]
    for scene, instruction, held, target in PLACED:
        plain = SamplingParams(max_tokens=160, grammar=arm.grammar())
        params = with_copy_bias(plain, arm, scene, instruction, BIAS)
        assert ("pk(", "pl(") in zip(
            params.copy_distinct_after, params.copy_distinct_openers, strict=True
        )
        alike = replace(params, copy_distinct_after=(), copy_distinct_openers=())
        # without the pairs the planner places what it holds on itself
        assert f"pk('{held}');pl('{held}')" in planner.plan("arm", scene, instruction, alike)
        text = planner.plan("arm", scene, instruction, params)
        assert f"pk('{held}');pl('{target}')" in text, (instruction, text)


def test_a_name_the_request_implies_and_the_planner_is_sure_of_stays(planner: Planner) -> None:
    robot, scene, instruction, name = IMPLIED
    text = planner.plan(robot, scene, instruction, planner.params(robot, scene, instruction, BIAS))
    assert f"'{name}'" in text


def test_a_message_is_not_a_name(planner: Planner) -> None:
    plain = planner.plan(*MESSAGE, planner.params(*MESSAGE, 0.0))
    assert plain.startswith("lg('cannot")
    assert planner.plan(*MESSAGE, planner.params(*MESSAGE, BIAS)) == plain
    # without openers every quoted text counts as a name, the message's too
    assert planner.plan(*MESSAGE, planner.params(*MESSAGE, BIAS, openers=False)) != plain


def test_sampled_plans_with_the_bias_still_parse(planner: Planner) -> None:
    for seed, (robot, scene, instruction, _) in enumerate(NAMED):
        params = replace(
            planner.params(robot, scene, instruction, BIAS), temperature=0.8, seed=seed
        )
        planner.plan(robot, scene, instruction, params)  # checks the plan


def test_bad_copy_parameters_are_refused_by_name(planner: Planner) -> None:
    good = planner.params(*NAMED[0][:3], BIAS)
    prompt = planner.encode("find it")
    with pytest.raises(ValueError, match="copy_bias"):
        planner.engine.add(900, prompt, replace(good, copy_bias=-2.0))
    with pytest.raises(ValueError, match="copy_names"):
        planner.engine.add(901, prompt, replace(good, copy_names=("o'clock",)))
