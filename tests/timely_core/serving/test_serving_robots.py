"""Registered robots and their stored prefixes: re-registering a robot with another
prompt unpins the prefix no robot uses any more (no leaked KV), and a task queued
with the old prefix is still served."""

from __future__ import annotations

from tests.timely_core.core_support import TinyLanguage, make_service
from timely_core.request import TaskRequest

PLANS = {"evade": "mu(30); tr(45); md(30);"}
OTHER = TinyLanguage(prefix="Skills: mu(cm) up, md(cm) down, tr(deg) turn right, say(t).\n")


def test_re_registering_with_another_prompt_unpins_the_old_prefix() -> None:
    service, _, engine = make_service(PLANS, robots=("d1", "d2"))
    shared = engine.memory().pinned_prefix_blocks
    assert shared > 0
    service.register_robot("d1", OTHER)  # d2 still uses the first prefix
    both = engine.memory().pinned_prefix_blocks
    assert both > shared
    service.register_robot("d2", OTHER)  # nobody uses the first one now
    assert engine.memory().pinned_prefix_blocks == both - shared
    service.register_robot("d1", OTHER)  # the same prompt again: nothing changes
    service.register_robot("d2", OTHER)
    assert engine.memory().pinned_prefix_blocks == both - shared
    memory = engine.memory()
    assert memory.device_blocks_free == memory.device_blocks_total - (both - shared)


def test_a_task_queued_before_its_robot_changed_prompt_is_still_served() -> None:
    service, clock, engine = make_service(PLANS, robots=("d1",))
    handle = service.submit_at(clock.now() + 1.0, TaskRequest(robot_id="d1", instruction="evade"))
    service.register_robot("d1", OTHER)  # the task's stored prefix is unpinned
    service.run_until_idle()
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    assert result.plan_text == PLANS["evade"]
    memory = engine.memory()
    assert memory.device_blocks_free == memory.device_blocks_total - memory.pinned_prefix_blocks
