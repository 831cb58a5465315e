"""A perception tool: the robot's perception skills (`lk('cup')`, `iv('cat')`,
`ox('cat')`, ...) answered from the simulated robot's scene, the moment the call
is decoded, as an observation written in the plan language
(`lk('cup')->True`), ready to be shown to the planner."""

from __future__ import annotations

import random
from typing import Any

from robot_models.executors import SimulatedWorld
from robot_models.skills import SkillSet
from robot_models.tools.scene_text import scene_has
from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply


class ScenePerception(ToolPlugin):
    """Options: `robot_type`; `seed` for the simulated object positions; `validates`
    (default false): the statement waits for the answer before it is sent, which
    `append_observations` needs to show the answer to the planner."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.validates = bool(options.get("validates", False))  # type: ignore[misc]
        skill_set = SkillSet.load(str(options.get("robot_type", "")))
        self._names = {name: s.name for s in skill_set.perception() for name in (s.name, s.short)}
        self.skills = frozenset(self._names)  # type: ignore[misc]
        self._rng = random.Random(int(options.get("seed", 0)))
        self._worlds: dict[str, SimulatedWorld] = {}  # by task: positions stay put

    def on_call(self, call: ToolCall) -> ToolReply:
        obj = call.args[0] if call.args else None
        if not isinstance(obj, str):
            return ToolReply.ok()  # a variable: known only when the robot runs the plan
        world = self._worlds.setdefault(call.task_id, SimulatedWorld(set()))
        if scene_has(call.scene, obj):
            world.present.add(obj)
        value = world.observe(self._names[call.skill], obj, self._rng)
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        return ToolReply.observes(f"{call.text}->{shown}")

    def on_task_end(self, task_id: str) -> None:
        self._worlds.pop(task_id, None)
