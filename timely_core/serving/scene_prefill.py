"""Prefill of published scenes, one per loop pass (call holding the state's
`engine_gate`, not its `lock`).

The prefill runs between engine iterations, so it delays the running batch by one
prefill of the scene's tokens; a scene is prefilled once per change (debounced),
not once per task. The engine prefills the robot's stored prefix + the scene's
opening of the request part; the stored prefix's full blocks come from its prefix
cache, so only the scene's blocks are computed.
"""

from __future__ import annotations

import logging

from timely_core.engine.block_manager import blocks_for
from timely_core.engine.protocol import OutOfKvMemory
from timely_core.serving.robots import scene_request_ids
from timely_core.serving.scenes import ScenePrefix, scene_prefix_id
from timely_core.serving.state import ServiceState
from timely_core.serving.variants import register_variant_prefix

log = logging.getLogger(__name__)


class ScenePrefill:
    def __init__(self, state: ServiceState) -> None:
        self._state = state

    def run_due(self) -> bool:
        """Prefill the scene due first, if any is due. True if the engine worked."""
        state = self._state
        with state.lock:
            unpins = state.scenes.take_unpins()
            due = state.scenes.take_due(state.clock.now())
            robot = state.robots.get(due[0]) if due is not None else None
        for prefix_id in unpins:
            state.engine.unregister_prefix(prefix_id)
        if due is None or robot is None or robot.prefix.prefix_id is None:
            return False
        robot_id, text = due
        ids = list(robot.prefix.token_ids) + scene_request_ids(
            state.tokenizer, robot.language, text
        )
        if tuple(ids[: len(robot.prefix.shared_ids)]) != robot.prefix.shared_ids:
            log.warning("robot %s: its scene's request part does not open as stored", robot_id)
            return False
        prefix_id = scene_prefix_id(ids, robot.variant)
        size = state.block_size
        blocks = blocks_for(len(ids), size) - len(robot.prefix.shared_ids) // size
        with state.lock:
            now = state.clock.now()
            known = state.scenes.prefixes.get(prefix_id)
            if known is not None:  # another robot sees the same scene
                state.scenes.attach(robot_id, text, known, now)
                return False
            victims = state.scenes.evictions_for(blocks)
            if victims is None:
                log.info(
                    "robot %s: scene of %d tokens exceeds the scene KV budget (%d blocks)",
                    robot_id,
                    len(ids),
                    state.scenes.budget_blocks,
                )
                return False
            headroom = len(state.running) + 1  # each running decode may need a block
            if state.engine.memory().device_blocks_free - blocks < headroom:
                self._later(robot_id, text)  # tasks come first
                return False
            for victim in victims:
                state.scenes.forget(victim)
            for victim_id in state.scenes.take_unpins():
                state.engine.unregister_prefix(victim_id)
        try:
            # not under the lock: it computes
            register_variant_prefix(state.engine, prefix_id, ids, robot.variant)
        except OutOfKvMemory:
            with state.lock:
                self._later(robot_id, text)
            return False
        with state.lock:
            prefix = ScenePrefix(
                prefix_id, tuple(ids), blocks, state.clock.now(), variant=robot.variant
            )
            state.counters["scene_prefills"] += 1
            if not state.scenes.attach(robot_id, text, prefix, state.clock.now()):
                state.engine.unregister_prefix(prefix_id)  # republished meanwhile
        return True

    def _later(self, robot_id: str, text: str) -> None:
        """No memory for the prefill now: retry while tasks run (they free memory as
        they end); on an idle engine memory will not change, so wait for the next
        publication. Call holding `lock`."""
        state = self._state
        if state.running:
            state.scenes.retry(robot_id, text, state.clock.now())
        else:
            log.info("robot %s: no KV memory free to prefill its scene", robot_id)
