"""Typed, described parameters derived from the config models: what
`ros2 param describe` shows, integers given for doubles, wrong types named."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from rcl_interfaces.msg import ParameterType
from timely_ros.config import ConfigError, PlannerParams
from timely_ros.param_descriptors import described_fields


@pytest.fixture
def ros_context() -> Iterator[Any]:
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context)
    yield context
    rclpy.try_shutdown(context=context)


def _executor_node(context: Any, **params: Any) -> Any:
    from rclpy.parameter import Parameter
    from timely_ros.skill_executor_node import SkillExecutorNode

    overrides = [Parameter(k, value=v) for k, v in {"backend": "sim-drone", **params}.items()]
    return SkillExecutorNode(namespace="/drone9", parameter_overrides=overrides, context=context)


def test_every_planner_field_is_typed_and_described() -> None:
    fields = {f.name: f for f in described_fields(PlannerParams)}
    # adapters is a map: one string parameter per variant (adapters.<name>), see below
    assert set(fields) == set(PlannerParams.model_fields) - {"adapters"}
    for field in fields.values():
        assert field.descriptor.type != ParameterType.PARAMETER_NOT_SET, field.name
        assert field.descriptor.description, f"{field.name} has no description"
    policy = fields["policy"].descriptor
    assert policy.type == ParameterType.PARAMETER_STRING
    assert "one of: timely, fcfs" in policy.additional_constraints
    queue = fields["max_queue"].descriptor
    assert queue.type == ParameterType.PARAMETER_INTEGER
    assert (queue.integer_range[0].from_value, queue.integer_range[0].to_value) == (1, 100_000)
    kv = fields["kv_budget_mb"].descriptor
    assert kv.type == ParameterType.PARAMETER_DOUBLE and "> 0" in kv.additional_constraints
    assert fields["robots"].descriptor.type == ParameterType.PARAMETER_STRING_ARRAY
    assert fields["grammar"].default is True


@pytest.mark.ros
def test_executor_parameters_are_declared_with_descriptors(ros_context: Any) -> None:
    node = _executor_node(ros_context, time_scale=3)  # an integer for a double
    try:
        scale = node.get_parameter("time_scale")
        assert scale.value == 3.0 and isinstance(scale.value, float)
        assert node.params.time_scale == 3.0
        # unset fields are declared with their defaults and descriptions
        (period,) = node.describe_parameters(["feedback_period_s"])
        assert period.type == ParameterType.PARAMETER_DOUBLE
        assert period.description == "period of ExecuteSkill feedback"
        assert node.get_parameter("feedback_period_s").value == 0.1
        (backend,) = node.describe_parameters(["backend"])
        assert "one of: sim-drone, sim-arm, tello" in backend.additional_constraints
    finally:
        node.destroy_node()


@pytest.mark.ros
def test_a_parameter_of_the_wrong_type_is_named(ros_context: Any) -> None:
    with pytest.raises(ConfigError, match="parameter 'time_scale': expected a double, got 'fast'"):
        _executor_node(ros_context, time_scale="fast")


@pytest.mark.ros
def test_planner_robot_settings_and_limits_are_described(ros_context: Any) -> None:
    from rclpy.parameter import Parameter
    from timely_ros.planner_node import PlannerNode

    overrides = {
        "engine": "simulated",
        "kv_budget_mb": 512,  # an integer for a double
        "robots": ["drone1", "arm1"],
        "drone1.type": "drone",
        "drone1.limits.max_altitude_cm": 150,
        "arm1.type": "arm",
        "arm1.dispatch": False,
    }
    node = PlannerNode(
        parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()],
        context=ros_context,
    )
    try:
        assert node.get_parameter("kv_budget_mb").value == 512.0
        (kind, scene, altitude) = node.describe_parameters(
            ["drone1.type", "arm1.scene_topic", "drone1.limits.max_altitude_cm"]
        )
        assert "one of: drone, arm" in kind.additional_constraints
        assert "empty: /<id>/scene" in scene.description
        assert altitude.type == ParameterType.PARAMETER_DOUBLE
        assert node.params.robot("drone1").limits.max_altitude_cm == 150.0
        # an unset limit stays unset (it would otherwise be checked)
        assert not node.has_parameter("drone1.limits.max_distance_cm")
        assert node.params.robot("arm1").limits is None
    finally:
        node.destroy_node()
