"""A parameter file read the way rcl reads it (`rcl_yaml_param_parser`), so `timely up`
and `timely_planner --params-file` see the same values in the same file.

PyYAML follows YAML 1.1, whose resolver types scalars otherwise: `4.096e3` and
`1e3` are strings to it (an exponent needs a dot and a sign), `1_000` and `1:30`
are integers, `y`/`n` strings and `2024-01-01` a date. rcl types a plain
(unquoted) scalar as a bool (its list of words), else an int64 (`strtol`, base 0:
decimal, 0x hex, 0 octal), else a double (`strtod`: exponents, hex, inf, nan, out
of range is none), else a string; quoted scalars are strings. A key given twice in
one mapping is refused: the last would win silently.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

_TRUE = ("Y", "y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")
_FALSE = ("N", "n", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")
_BOOL = {**dict.fromkeys(_TRUE, True), **dict.fromkeys(_FALSE, False)}
_INT = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_DECIMAL = r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_HEX = r"0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][-+]?[0-9]+)?"
_FLOAT = re.compile(rf"[-+]?(?:{_DECIMAL}|{_HEX}|(?i:inf|infinity|nan))")
_YAML_SPECIAL = {  # the YAML spellings rcl knows besides strtod's
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
}
_NULL = {"", "~", "null", "Null", "NULL"}  # rcl has no null: kept, to be refused as a value
_INT64 = range(-(2**63), 2**63)
_NULL_TAG = "tag:yaml.org,2002:null"
_RCL_TAG = "tag:timely_ros,2025:rcl-scalar"  # ours: a plain scalar rcl_scalar types


def rcl_scalar(text: str) -> bool | int | float | str:
    """A plain scalar's value as rcl's parser types it."""
    if text in _BOOL:
        return _BOOL[text]
    if _INT.fullmatch(text):
        digits = text.lstrip("+-")
        base = 16 if digits[:2] in ("0x", "0X") else 8 if digits.startswith("0") else 10
        value = int(digits, base) * (-1 if text.startswith("-") else 1)
        if value in _INT64:
            return value  # (strtol out of range: strtod's turn)
    if text in _YAML_SPECIAL:
        return _YAML_SPECIAL[text]
    if _FLOAT.fullmatch(text):
        body = text.lstrip("+-")
        number = float.fromhex(text) if body[:2] in ("0x", "0X") else float(text)
        if not math.isinf(number) or body.lower().startswith("inf"):
            return number  # (a finite number out of range: strtod's ERANGE, a string)
    return text


class RclLoader(yaml.SafeLoader):
    """PyYAML's safe loader with rcl's scalar types and no key given twice."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:  # plain: typed by its text
            if value in _NULL:
                return _NULL_TAG
            return _RCL_TAG
        return super().resolve(kind, value, implicit)

    def construct_rcl(self, node: yaml.ScalarNode) -> bool | int | float | str:
        return rcl_scalar(str(self.construct_scalar(node)))

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str | int | float | bool):
                continue  # the base loader names an unhashable key
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


RclLoader.add_constructor(_RCL_TAG, RclLoader.construct_rcl)


def load_rcl_yaml(text: str) -> Any:
    """The document in `text`, typed as rcl types a parameter file."""
    return yaml.load(text, Loader=RclLoader)
