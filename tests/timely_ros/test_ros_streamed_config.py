"""`streamed_skills` in the planner's robot config: only a robot type with streamed
skills takes it, its limits may name them, and the planner's service runs the
robot's StreamedPath tool (and only that robot's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from timely_ros.checkpoint import planner_checkpoint
from timely_ros.config import STREAMED_PATH_TOOL, PlannerParams, RobotSpec
from timely_ros.service_factory import build_service

from robot_models.safety_limits import SafetyLimits


def test_only_a_type_with_streamed_skills_takes_them() -> None:
    with pytest.raises(ValidationError, match="streamed_skills: the arm has no streamed skill"):
        RobotSpec(id="arm1", type="arm", streamed_skills=True)
    # fp is a skill of the drone only with streamed_skills
    limits = {"approval_skills": ["fp"]}
    spec = {"id": "d1", "type": "drone", "limits": limits}
    assert RobotSpec.model_validate({**spec, "streamed_skills": True}).limits
    with pytest.raises(ValidationError, match="fp"):
        RobotSpec.model_validate(spec)


def test_the_planner_runs_the_tool_for_streamed_robots_only(tmp_path: Path) -> None:
    params = PlannerParams(
        engine="simulated",
        model_path=str(planner_checkpoint(tmp_path)),
        kv_budget_mb=4096.0,
        robots=[
            RobotSpec(
                id="drone1",
                type="drone",
                streamed_skills=True,
                limits=SafetyLimits(max_distance_cm=300),
            ),
            RobotSpec(id="drone2", type="drone"),
        ],
    )
    service = build_service(params)
    try:
        service.unregister_tool("drone1", STREAMED_PATH_TOOL)  # it was registered
        with pytest.raises(KeyError, match="robot 'drone2' has no tool 'streamed_path'"):
            service.unregister_tool("drone2", STREAMED_PATH_TOOL)
    finally:
        service.close_tools()
