"""Execution times of plan statements from robot_models' execution-time models.

A statement's calls are sampled one by one (`ExecTimeModel.sample`). What a plan
does at run time depends on what the robot senses, which a replay cannot know; we
take every condition as true (the target is found, the LRTrace task succeeds), so
the robot runs the plan's full path, loops run their count, and a return ends the
plan. `p_true` < 1 makes conditions hold with that probability instead.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from robot_models.exec_time import ExecTimeModel
from robot_models.plan_ast import Assign, CallStmt, If, Loop, Return, Stmt, calls_in
from timely_core.language.plan_language import PlanStatement


class ExecTimeSampler:
    def __init__(self, models: dict[str, ExecTimeModel] | None = None, p_true: float = 1.0) -> None:
        if not 0.0 <= p_true <= 1.0:
            raise ValueError(f"p_true must be in [0, 1], got {p_true}")
        self._models = dict(models or {})
        self._p_true = p_true

    def model(self, robot_type: str) -> ExecTimeModel:
        if robot_type not in self._models:
            self._models[robot_type] = ExecTimeModel.for_robot(robot_type)
        return self._models[robot_type]

    def sample_s(
        self, robot_type: str, statements: Sequence[PlanStatement], rng: random.Random
    ) -> tuple[float, bool]:
        model = self.model(robot_type)
        total = 0.0
        for statement in statements:
            node = getattr(statement, "node", None)
            if node is None:
                raise TypeError(f"not a parsed robot_models statement: {statement!r}")
            seconds, returned = self._run(model, node, rng)
            total += seconds
            if returned:
                return total, True
        return total, False

    def _calls(self, model: ExecTimeModel, node: Any, rng: random.Random) -> float:
        return float(sum(model.sample(call, rng) for call in calls_in(node)))

    def _block(
        self, model: ExecTimeModel, body: Sequence[Stmt], rng: random.Random
    ) -> tuple[float, bool]:
        total = 0.0
        for stmt in body:
            seconds, returned = self._run(model, stmt, rng)
            total += seconds
            if returned:
                return total, True
        return total, False

    def _run(self, model: ExecTimeModel, node: Stmt, rng: random.Random) -> tuple[float, bool]:
        if isinstance(node, (CallStmt, Assign)):
            return self._calls(model, node, rng), False
        if isinstance(node, Return):
            return self._calls(model, node, rng), True
        if isinstance(node, If):
            cond = self._calls(model, node.cond, rng)
            if self._p_true >= 1.0 or rng.random() < self._p_true:
                body, returned = self._block(model, node.body, rng)
                return cond + body, returned
            return cond, False
        if isinstance(node, Loop):
            total = 0.0
            for _ in range(node.count):
                seconds, returned = self._block(model, node.body, rng)
                total += seconds
                if returned:
                    return total, True
            return total, False
        raise TypeError(f"not a plan statement: {node!r}")
