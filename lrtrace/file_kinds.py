"""What a file given to the wrong command is, so the error says it (`report s.lrt`:
"it looks like an lrtrace trace") instead of a decoder's complaint about its bytes.

lrtrace's own files carry a `format` header (msgpack or JSON); a few other files a
user may mix up (a report's `--json` statistics, a latency profile) are told by
their fields. The formats are spelled out here rather than imported, so the loaders
of every format can use this module without importing each other.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgpack

FORMATS: Final = {
    "lrtrace-trace": "an lrtrace trace (msgpack, written by `lrtrace compose`)",
    "lrtrace-results": "an lrtrace results file (written by `lrtrace replay`)",
    "lrtrace-executions": "an lrtrace executions file (written by `lrtrace record`)",
    "lrtrace-capacity": "lrtrace capacity results (written by `lrtrace capacity`)",
}
STATISTICS: Final = "statistics written by `lrtrace report --json`"
PROFILE: Final = "a latency profile (written by `lrtrace profile-engine`)"


def what_is(data: bytes) -> str | None:
    """`data` as `an lrtrace trace (...)` when it is one of the files lrtrace knows,
    else None."""
    doc = _decode(data)
    if not isinstance(doc, dict):
        return None
    kind = doc.get("format")
    if isinstance(kind, str) and kind in FORMATS:
        return FORMATS[kind]
    if {"workload", "runs", "stats"} <= doc.keys():
        return STATISTICS
    if {"iteration_s", "kv_capacity_tokens"} <= doc.keys():
        return PROFILE
    return None


def _decode(data: bytes) -> Any:
    """The document `data` holds as JSON or msgpack; None when it is neither."""
    if data.lstrip()[:1] in (b"{", b"["):
        try:
            return json.loads(data)
        except ValueError:  # a JSON decode error or text that is not UTF-8
            return None
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.ExtraData):
        return None
