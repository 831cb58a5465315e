"""`ServiceConfig.prefix_cache`: with it off (and the engine's content cache off, as
on a server without a prefix cache) every prompt is prefilled whole, plans
unchanged; and a fleet whose suspended generations hold every KV block still
finishes (the engine swaps them out)."""

from __future__ import annotations

from tests.timely_core.core_support import TinyLanguage, eos_id, make_service, make_tokenizer
from timely_core.engine.protocol import HandlingStrategy
from timely_core.engine.sim.engine import SimulatedEngineConfig
from timely_core.request import TaskRequest
from timely_core.service_config import ServiceConfig
from timely_core.serving.robots import encode_prefix, encode_request

PLANS = {
    "evade": "mu(30); tr(45); md(30);",
    "look for the cat": "mf(50); tl(90); search('cat'); say('found it');",
}
NO_CACHE = ServiceConfig(prefix_cache=False)


def prompt_len(instruction: str) -> int:
    tokenizer, language = make_tokenizer(), TinyLanguage()
    return len(encode_prefix(tokenizer, language.prompt_prefix())) + len(
        encode_request(tokenizer, language.format_request("sofa", instruction))
    )


def test_without_the_prefix_cache_every_prompt_is_prefilled_whole() -> None:
    engine_config = SimulatedEngineConfig(eos_token_id=eos_id(), enable_prefix_caching=False)
    service, _, engine = make_service(
        PLANS, robots=("d1", "d2"), config=NO_CACHE, engine_config=engine_config
    )
    assert engine.stats.prefill_tokens == 0  # nothing prefilled at registration
    assert service.stats().kv_device_blocks_free == service.stats().kv_device_blocks_total
    handles = [
        service.submit(TaskRequest(robot_id=robot, scene="sofa", instruction="evade"))
        for robot in ("d1", "d2")
    ]
    service.run_until_idle()
    for handle in handles:
        assert handle.result(timeout_s=0).plan_text == PLANS["evade"]
    assert engine.stats.prefill_tokens == 2 * prompt_len("evade")


def test_the_prefix_cache_is_on_by_default() -> None:
    service, _, engine = make_service(PLANS, robots=("d1", "d2"))
    pinned = service.stats().kv_device_blocks_total - service.stats().kv_device_blocks_free
    assert pinned > 0 and engine.stats.prefill_tokens > 0


def test_suspended_generations_holding_every_block_do_not_stall_the_fleet() -> None:
    """Eight robots, whole prompts, a device for about three of them: generations
    suspended with `preserve` while their robots move fill it, and the ones that
    must run get their blocks by swapping them out. Every plan is delivered whole."""
    blocks_per_prompt = -(-prompt_len("look for the cat") // 16) + 1
    robots = tuple(f"d{i}" for i in range(8))
    service, _, engine = make_service(
        PLANS,
        robots=robots,
        config=ServiceConfig(prefix_cache=False, handling_strategy=HandlingStrategy.PRESERVE),
        engine_config=SimulatedEngineConfig(
            eos_token_id=eos_id(),
            block_size=16,
            device_blocks=3 * blocks_per_prompt,
            enable_prefix_caching=False,
        ),
    )
    tasks = ["look for the cat", "evade"] * 4
    handles = [
        service.submit(TaskRequest(robot_id=robot, scene="sofa", instruction=task))
        for robot, task in zip(robots, tasks, strict=True)
    ]
    service.run_until_idle(max_iterations=100_000)
    for handle, task in zip(handles, tasks, strict=True):
        result = handle.result(timeout_s=0)
        assert result.success, result.error
        assert result.plan_text == PLANS[task]
    assert engine.stats.swapped_out_blocks > 0  # preserved caches made room
    assert engine.memory().device_blocks_free == engine.memory().device_blocks_total
