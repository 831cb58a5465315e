"""Executors run one validated skill call on a robot, real or simulated.

`SkillExecutor` is the whole interface the interpreter (and the ROS 2 skill
executor node) needs, so a Tello executor only has to implement `execute`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from robot_models.exec_time import ExecTimeModel, ExecutionRecord
from robot_models.plan_ast import BoundCall
from robot_models.skills import SkillValue, check_robot_type

ProgressCallback = Callable[[float], None]
"""Called with the fraction of the call done, from 0.0 to 1.0 (1.0 exactly once, at the end)."""


@runtime_checkable
class SkillExecutor(Protocol):
    """Runs skill calls of one robot type, blocking until each is done."""

    @property
    def robot_type(self) -> str: ...

    def execute(self, call: BoundCall, progress: ProgressCallback | None = None) -> SkillValue:
        """Execute a call whose arguments are already validated; return the skill's
        value (None for skills that return nothing)."""
        ...


@dataclass
class SimulatedWorld:
    """What a simulated robot can perceive: the objects present (visible to the
    drone, on the table for the arm), and where they are in the image."""

    present: set[str] = field(default_factory=set)
    positions: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)

    def observe(self, skill: str, obj: str, rng: random.Random) -> SkillValue:
        """Value of a perception skill about `obj`."""
        if skill in ("is_visible", "look_for", "sweep"):
            return obj in self.present
        x, y, w, h = self.positions.setdefault(
            obj, (rng.random(), rng.random(), 0.05 + 0.3 * rng.random(), 0.05 + 0.3 * rng.random())
        )
        values = {"object_x": x, "object_y": y, "object_width": w, "object_height": h}
        if skill not in values:
            raise ValueError(f"the simulated world cannot answer skill '{skill}'")
        return values[skill] if obj in self.present else 0.0


class SimulatedExecutor:
    """A robot simulated by sleeping for a sampled execution time. `sleep` is
    injectable (a virtual clock's advance, or a no-op in tests); the durations used
    are kept in `history` so runs can refit or check the model."""

    def __init__(
        self,
        robot_type: str,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
        exec_time: ExecTimeModel | None = None,
        world: SimulatedWorld | None = None,
        progress_steps: int = 4,
    ) -> None:
        if progress_steps < 1:
            raise ValueError(f"progress_steps must be >= 1, got {progress_steps}")
        self._robot_type = check_robot_type(robot_type)
        self._rng = rng or random.Random(0)
        self._sleep = sleep
        # every skill the robot can run, streamed ones too (what a planner may write
        # is its language's business)
        self._exec_time = exec_time or ExecTimeModel.for_robot(robot_type, streamed=True)
        self._world = world or SimulatedWorld()
        self._steps = progress_steps
        self.history: list[ExecutionRecord] = []

    @property
    def robot_type(self) -> str:
        return self._robot_type

    @property
    def world(self) -> SimulatedWorld:
        return self._world

    def execute(self, call: BoundCall, progress: ProgressCallback | None = None) -> SkillValue:
        skill = self._exec_time.skill_set.validate_call(call.name, call.args)
        duration = self._exec_time.sample(call, self._rng)
        for step in range(1, self._steps + 1):
            self._sleep(duration / self._steps)
            if progress is not None:
                progress(step / self._steps)
        self.history.append(ExecutionRecord(call, duration))
        if skill.returns == "none":
            return None
        if skill.args and isinstance(call.args[0], str):
            return self._world.observe(skill.name, call.args[0], self._rng)
        raise ValueError(f"the simulated world cannot answer skill '{skill.name}'")
