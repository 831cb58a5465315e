"""The fixed opening of the request part is stored and prefilled with the robot's
prefix; prompts, and so plans, stay exactly what the model was trained on."""

from __future__ import annotations

from dataclasses import dataclass

from tests.timely_core.core_support import TinyLanguage, make_service, make_tokenizer
from timely_core.request import TaskRequest
from timely_core.serving.robots import encode_prefix, encode_request, request_header_ids

PLANS = {"evade": "mu(30); tr(45); md(30);", "look for the cat": "mf(50); search('cat');"}


@dataclass(frozen=True)
class NoHeaderLanguage(TinyLanguage):
    """Its request part opens with the instruction: no fixed header."""

    def format_request(self, scene: str, instruction: str) -> str:
        return f"{instruction}\nScene: {scene}\nPlan:"


@dataclass(frozen=True)
class MoodyLanguage(TinyLanguage):
    """Opens with "Scene:" unless the scene starts with "!": a header the probes
    cannot see coming."""

    def format_request(self, scene: str, instruction: str) -> str:
        if scene.startswith("!"):
            return f"Alert {scene}\nTask: {instruction}\nPlan:"
        return super().format_request(scene, instruction)


def test_the_header_is_what_every_request_part_opens_with() -> None:
    tokenizer = make_tokenizer()
    header = request_header_ids(tokenizer, TinyLanguage())
    assert tokenizer.decode(header) == "Scene:"
    request = encode_request(tokenizer, TinyLanguage().format_request("sofa", "evade"))
    assert request[: len(header)] == header
    assert request_header_ids(tokenizer, NoHeaderLanguage()) == []


def test_header_is_prefilled_once_with_the_prefix_and_plans_are_unchanged() -> None:
    tokenizer = make_tokenizer()
    language = TinyLanguage()
    prefix = encode_prefix(tokenizer, language.prompt_prefix())
    header = request_header_ids(tokenizer, language)
    service, _, engine = make_service(PLANS, robots=("d1", "d2"))
    assert engine.stats.prefill_tokens == len(prefix) + len(header)  # once for both robots

    before = engine.stats.prefill_tokens
    handle = service.submit(TaskRequest(robot_id="d2", scene="sofa", instruction="evade"))
    service.run_until_idle()
    result = handle.result(timeout_s=0)
    assert result.success and result.plan_text == PLANS["evade"]
    request = encode_request(tokenizer, language.format_request("sofa", "evade"))
    assert engine.stats.prefill_tokens - before == len(request) - len(header)


def test_a_request_opening_otherwise_is_served_whole_and_alone() -> None:
    service, _, engine = make_service(PLANS, robots=())
    service.register_robot("d1", MoodyLanguage())
    service.register_robot("d2", TinyLanguage())
    tokenizer = make_tokenizer()
    prefix_len = len(encode_prefix(tokenizer, TinyLanguage().prompt_prefix()))
    prompt_len = prefix_len + len(
        encode_request(tokenizer, MoodyLanguage().format_request("!fire", "evade"))
    )
    before = engine.stats.prefill_tokens
    odd = service.submit(TaskRequest(robot_id="d1", scene="!fire", instruction="evade"))
    usual = service.submit(TaskRequest(robot_id="d2", scene="sofa", instruction="look for the cat"))
    service.run_until_idle()
    assert odd.result(timeout_s=0).plan_text == PLANS["evade"]
    assert usual.result(timeout_s=0).plan_text == PLANS["look for the cat"]
    usual_tokens = len(
        encode_request(tokenizer, TinyLanguage().format_request("sofa", "look for the cat"))
    ) - len(request_header_ids(tokenizer, TinyLanguage()))
    # the odd prompt is served without the stored prefix (it does not start with the
    # stored ids): only the prefix's full blocks come from the engine's content cache
    block = engine.memory().block_size
    cached = prefix_len // block * block
    assert engine.stats.prefill_tokens - before == prompt_len - cached + usual_tokens
