"""A plan that outgrows the whole device's KV memory ends its own task, with a reason
that says so (the device's size and what pinned prefixes hold), and nothing is left
held; the other robots' tasks, which it pushed aside while it grew, finish with their
full plans (simulated engine, virtual time)."""

from __future__ import annotations

from tests.timely_core.core_support import eos_id, make_service
from timely_core.engine.sim.engine import SimulatedEngineConfig
from timely_core.request import TaskRequest

LONG = "look everywhere"
PLANS = {
    LONG: " ".join(f"mf({10 + i}); tl({20 + i});" for i in range(40)),
    "look for the cat": " ".join(f"say('looking for the cat in room {i}');" for i in range(6)),
    "evade": " ".join(f"say('moving away from the obstacle number {i}');" for i in range(4)),
}
SCENE = ", ".join(f"box {i}" for i in range(18))  # the long task's prompt is long too
BLOCKS = 16  # of 16 tokens: each short task fits, the long one outgrows the device


def test_a_plan_longer_than_the_device_fails_alone() -> None:
    config = SimulatedEngineConfig(eos_token_id=eos_id(), block_size=16, device_blocks=BLOCKS)
    service, _, engine = make_service(PLANS, robots=("d0", "d1", "d2"), engine_config=config)
    tasks = [("long", "d0", LONG), ("cat", "d1", "look for the cat"), ("evade", "d2", "evade")]
    handles = {
        task: service.submit(
            TaskRequest(
                task_id=task,
                robot_id=robot,
                instruction=text,
                scene=SCENE if task == "long" else "",
            )
        )
        for task, robot, text in tasks
    }
    plan_tokens = len(engine.script(service._state.generations["long"].prompt_ids))
    assert plan_tokens > BLOCKS * 16  # the long plan alone outgrows the device
    service.run_until_idle()
    for task, _, text in tasks[1:]:
        result = handles[task].result(timeout_s=0)
        assert result.success, result.error
        assert "".join(s.text for s in handles[task].segments()) == PLANS[text]
    long = handles["long"].result(timeout_s=0)
    assert not long.success
    assert "does not fit in device KV memory even with every other generation" in long.error
    assert f"{BLOCKS} blocks of 16 tokens" in long.error
    assert long.segment_count > 0  # it ran until it outgrew the device
    assert engine.scheduler.preemptions > 0  # the short ones were pushed aside
    report = engine.memory()
    assert report.device_blocks_free == report.device_blocks_total - report.pinned_prefix_blocks
