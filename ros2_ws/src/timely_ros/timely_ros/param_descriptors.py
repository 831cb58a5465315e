"""Typed, described parameter declarations derived from the pydantic config models.

The config models (`config.py`) stay the one source of truth: each field's type,
default, constraints and description become a `ParameterDescriptor`, so
`ros2 param describe /timely/timely_planner kv_budget_mb` shows what the field means
and which values it takes, and a value of the wrong type fails at start-up naming
the parameter. Values a parameter file gives as integers for a float field (`64`
for `64.0`) are taken as floats, as pydantic would.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from robot_models.safety_limits import SafetyLimits
from timely_ros.config import ConfigError, ExecutorParams, PlannerParams, RobotSpec

_SCALARS = {
    bool: ParameterType.PARAMETER_BOOL,
    int: ParameterType.PARAMETER_INTEGER,
    float: ParameterType.PARAMETER_DOUBLE,
    str: ParameterType.PARAMETER_STRING,
}
_ARRAYS = {
    bool: ParameterType.PARAMETER_BOOL_ARRAY,
    int: ParameterType.PARAMETER_INTEGER_ARRAY,
    float: ParameterType.PARAMETER_DOUBLE_ARRAY,
    str: ParameterType.PARAMETER_STRING_ARRAY,
}
_TYPE_NAMES = {
    ParameterType.PARAMETER_BOOL: "a bool",
    ParameterType.PARAMETER_INTEGER: "an integer",
    ParameterType.PARAMETER_DOUBLE: "a double",
    ParameterType.PARAMETER_STRING: "a string",
    ParameterType.PARAMETER_BOOL_ARRAY: "a list of bools",
    ParameterType.PARAMETER_INTEGER_ARRAY: "a list of integers",
    ParameterType.PARAMETER_DOUBLE_ARRAY: "a list of doubles",
    ParameterType.PARAMETER_STRING_ARRAY: "a list of strings",
}


@dataclass(frozen=True)
class DescribedField:
    """One leaf of a config model as a ROS 2 parameter."""

    name: str  # dotted, as in a parameter file
    descriptor: ParameterDescriptor
    default: Any  # None: no default (required, or unset means "not checked")


def _strip_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _ros_type(annotation: Any) -> tuple[int, str]:
    """The parameter type of a field, and the allowed values of a Literal ('' if any)."""
    annotation = _strip_optional(annotation)
    origin = typing.get_origin(annotation)
    if origin is Literal:
        values = typing.get_args(annotation)
        kind = type(values[0])
        return _SCALARS[kind], "one of: " + ", ".join(str(v) for v in values)
    if origin in (list, tuple):
        item = _strip_optional(typing.get_args(annotation)[0])
        return _ARRAYS.get(item, ParameterType.PARAMETER_STRING_ARRAY), ""
    if annotation in _SCALARS:
        return _SCALARS[annotation], ""
    return ParameterType.PARAMETER_NOT_SET, ""


def _bounds(info: FieldInfo) -> dict[str, float]:
    found: dict[str, float] = {}
    for item in info.metadata:
        for key in ("gt", "ge", "lt", "le"):
            value = getattr(item, key, None)
            if value is not None:
                found[key] = value
    return found


def _constraints(info: FieldInfo, allowed: str) -> str:
    words = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    parts = [f"{words[k]} {v:g}" for k, v in _bounds(info).items()]
    pattern = next((getattr(m, "pattern", None) for m in info.metadata), None)
    if pattern:
        parts.append(f"matches {pattern}")
    if allowed:
        parts.append(allowed)
    return "; ".join(parts)


def _ranges(descriptor: ParameterDescriptor, info: FieldInfo) -> None:
    """Inclusive ranges ROS 2 tools display and enforce (exclusive bounds stay text)."""
    bounds = _bounds(info)
    if "ge" not in bounds or "le" not in bounds:
        return
    if descriptor.type == ParameterType.PARAMETER_INTEGER:
        descriptor.integer_range = [
            IntegerRange(from_value=int(bounds["ge"]), to_value=int(bounds["le"]), step=0)
        ]
    elif descriptor.type == ParameterType.PARAMETER_DOUBLE:
        descriptor.floating_point_range = [
            FloatingPointRange(
                from_value=float(bounds["ge"]), to_value=float(bounds["le"]), step=0.0
            )
        ]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    annotation = _strip_optional(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def described_fields(
    model: type[BaseModel], prefix: str = "", skip: frozenset[str] = frozenset()
) -> Iterator[DescribedField]:
    """Every leaf field of `model` (nested models flattened to dotted names)."""
    for field_name, info in model.model_fields.items():
        if field_name in skip:
            continue
        name = f"{prefix}{field_name}"
        nested = _model_of(info.annotation)
        if nested is not None:
            yield from described_fields(nested, f"{name}.")
            continue
        ros_type, allowed = _ros_type(info.annotation)
        if ros_type == ParameterType.PARAMETER_NOT_SET:
            continue  # not a parameter-shaped field (declared by the caller)
        descriptor = ParameterDescriptor(
            name=name,
            type=ros_type,
            description=info.description or "",
            additional_constraints=_constraints(info, allowed),
        )
        _ranges(descriptor, info)
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        if isinstance(default, tuple):
            default = list(default)
        yield DescribedField(name, descriptor, default)


def _retype(node: Node, field: DescribedField, value: Any) -> None:
    """Hold `value` (a double for the integer the overrides gave) under the field's
    descriptor. A redeclared parameter takes its override again, so it is declared
    dynamically typed first, set, then given its strict descriptor."""
    node.undeclare_parameter(field.name)
    node.declare_parameter(field.name, value, ParameterDescriptor(dynamic_typing=True))
    node.set_parameters([Parameter(field.name, value=value)])
    node.set_descriptor(field.name, field.descriptor)


def declare_overrides(node: Node) -> None:
    """Declare every parameter the node's overrides set (its `--params-file`, `-p`, or
    `timely up`'s), as rclpy's `automatically_declare_parameters_from_overrides`
    does, but leave out those without a type: rcl reads an empty list (`tools: []`)
    as PARAMETER_NOT_SET, which rclpy refuses to declare. Left out, it reads as a
    key not given: an optional list is empty, a required one (`robots`) missing."""
    overrides = node._parameter_overrides  # rclpy keeps them only there (no accessor)
    node.declare_parameters(
        "",
        [
            (name, parameter.value, ParameterDescriptor())
            for name, parameter in overrides.items()
            if parameter.type_ != Parameter.Type.NOT_SET
        ],
        ignore_override=True,
    )


def declare_described(node: Node, fields: list[DescribedField], *, defaults: bool) -> None:
    """Give the node's parameters their descriptors: a parameter the overrides set
    keeps its value (an integer given for a double becomes a double); one they do not
    set is declared with its default when `defaults` (fields without a default stay
    undeclared: ROS 2 parameters cannot hold None)."""
    for field in fields:
        wanted = field.descriptor.type
        if node.has_parameter(field.name):
            parameter = node.get_parameter(field.name)
            value = parameter.value
            if (
                wanted == ParameterType.PARAMETER_DOUBLE
                and parameter.type_ == Parameter.Type.INTEGER
            ):
                _retype(node, field, float(value))
                continue
            if (
                wanted == ParameterType.PARAMETER_DOUBLE_ARRAY
                and parameter.type_ == Parameter.Type.INTEGER_ARRAY
            ):
                _retype(node, field, [float(v) for v in value])
                continue
            if int(parameter.type_) != wanted and value not in ([], ()):
                raise ConfigError(
                    f"parameter {field.name!r}: expected {_TYPE_NAMES.get(wanted, 'another type')}"
                    f", got {value!r}"
                )
            if int(parameter.type_) == wanted:
                node.set_descriptor(field.name, field.descriptor)
        elif defaults and field.default not in (None, []):  # [] has no ROS type
            node.declare_parameter(field.name, field.default, field.descriptor)


def declare_planner_parameters(node: Node) -> None:
    """The planner's parameters, typed and described: its own fields with their
    defaults, each listed robot's settings under its id, and the robot's limits
    (only where set: an unset limit is not checked)."""
    declare_overrides(node)
    declare_described(node, list(described_fields(PlannerParams)), defaults=True)
    declare_described(node, list(_adapter_fields(node)), defaults=False)
    ids = node.get_parameter("robots").value if node.has_parameter("robots") else None
    if not isinstance(ids, list):
        return  # planner_params names the problem
    for robot_id in ids:
        if not isinstance(robot_id, str) or not robot_id:
            continue
        own = described_fields(RobotSpec, f"{robot_id}.", frozenset({"id", "limits"}))
        declare_described(node, list(own), defaults=True)
        limits = described_fields(SafetyLimits, f"{robot_id}.limits.")
        declare_described(node, list(limits), defaults=False)


def _adapter_fields(node: Node) -> Iterator[DescribedField]:
    """`adapters` is a map: one string parameter per fleet variant, adapters.<name>."""
    description = PlannerParams.model_fields["adapters"].description or ""
    for name in node.get_parameters_by_prefix("adapters"):
        full = f"adapters.{name}"
        descriptor = ParameterDescriptor(
            name=full, type=ParameterType.PARAMETER_STRING, description=description
        )
        yield DescribedField(full, descriptor, None)


def declare_executor_parameters(node: Node) -> None:
    """A skill executor's parameters, typed and described, with their defaults."""
    declare_overrides(node)
    fields = described_fields(ExecutorParams, skip=frozenset({"robot_id"}))
    declare_described(node, list(fields), defaults=True)
