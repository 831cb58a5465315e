"""A parameter file's values typed as rcl types them (`timely_ros.param_yaml`), so
`timely up` takes the numbers `--params-file` takes (PyYAML's YAML 1.1 read
`4.096e3` as a string)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from timely_ros.config import ConfigError, load_bringup
from timely_ros.param_yaml import load_rcl_yaml, rcl_scalar

# plain scalar -> rcl's value (rcl_yaml_param_parser: bool words, strtol, strtod)
SCALARS: dict[str, object] = {
    "4.096e3": 4096.0,  # no sign in the exponent
    "1e3": 1000.0,  # no dot
    "1.0e12": 1e12,
    "1e+3": 1000.0,
    "-2.5E-1": -0.25,
    ".5": 0.5,
    "1.": 1.0,
    "08": 8.0,  # no octal digit: strtod's
    ".inf": math.inf,
    "-.Inf": -math.inf,
    "inf": math.inf,
    "99999999999999999999": 1e20,  # past int64: strtod's
    "64": 64,
    "-7": -7,
    "0x1F": 31,
    "010": 8,
    "true": True,
    "y": True,
    "Off": False,
    "n": False,
    "1_000": "1_000",  # YAML 1.1 integers and dates are strings to rcl
    "1:30": "1:30",
    "2024-01-01": "2024-01-01",
    "1e999": "1e999",  # out of range: strtod's ERANGE
    "1e": "1e",
    "-.nan": "-.nan",
    "drone1": "drone1",
}


@pytest.mark.parametrize(("text", "value"), list(SCALARS.items()))
def test_plain_scalars_are_typed_as_rcl_types_them(text: str, value: object) -> None:
    got = load_rcl_yaml(f"v: {text}\n")["v"]
    assert got == value and type(got) is type(value)


def test_nan_and_quoted_scalars() -> None:
    nan = rcl_scalar(".nan")
    assert isinstance(nan, float) and math.isnan(nan)
    doc = load_rcl_yaml("a: '4.096e3'\nb: \"true\"\nc: [1, 2.5e3]\nd:\n")
    assert doc == {"a": "4.096e3", "b": "true", "c": [1, 2500.0], "d": None}


def test_a_key_given_twice_is_refused() -> None:
    import yaml

    with pytest.raises(yaml.YAMLError, match="key 'a' is given twice"):
        load_rcl_yaml("a: 1\na: 2\n")


@pytest.mark.parametrize("kv_budget", ["4.096e3", "4096e0", "1.0e3", "1e+3"])
def test_timely_up_takes_exponents_as_numbers(tmp_path: Path, kv_budget: str) -> None:
    path = tmp_path / "planner.yaml"
    path.write_text(
        "/**/timely_planner:\n  ros__parameters:\n"
        f"    kv_budget_mb: {kv_budget}\n    result_timeout_s: 1.2e2\n"
        "    robots: [drone1]\n    drone1: {type: drone}\n"
    )
    config = load_bringup(path)
    assert config.planner is not None
    assert config.planner.kv_budget_mb == float(kv_budget)
    assert config.planner.result_timeout_s == 120.0


def test_a_number_too_large_for_a_double_is_a_string_as_for_rcl(tmp_path: Path) -> None:
    path = tmp_path / "planner.yaml"
    path.write_text(
        "/**/timely_planner:\n  ros__parameters:\n    kv_budget_mb: 1e999\n"
        "    robots: [drone1]\n    drone1: {type: drone}\n"
    )
    with pytest.raises(ConfigError, match="kv_budget_mb: expected a number, got '1e999'"):
        load_bringup(path)


@pytest.mark.ros
def test_the_loader_agrees_with_rcl(tmp_path: Path) -> None:
    """rcl's own parser (rclpy.init --params-file) reads each scalar to the same value."""
    import rclpy
    from rclpy.context import Context
    from rclpy.node import Node

    from tests.timely_ros.ros_support import DOMAIN_ID

    names = {f"p{i}": text for i, text in enumerate(SCALARS)}
    body = "".join(f"    {name}: {text}\n" for name, text in names.items())
    path = tmp_path / "params.yaml"
    path.write_text(f"/**/rcl_probe:\n  ros__parameters:\n{body}")
    context = Context()
    rclpy.init(args=["probe", "--ros-args", "--params-file", str(path)], context=context,
               domain_id=DOMAIN_ID)  # fmt: skip
    try:
        node = Node(
            "rcl_probe", context=context, automatically_declare_parameters_from_overrides=True
        )
        try:
            for name, text in names.items():
                rcl = node.get_parameter(name).value
                ours = load_rcl_yaml(f"v: {text}\n")["v"]
                assert (rcl, type(rcl)) == (ours, type(ours)), text
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
