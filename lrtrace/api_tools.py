"""Tool plugins for the API mix's classes (LAMPS Table 2), each loaded by module name
in its own process through the service's ToolRouter (lrtrace/api_mix_plugins.py).

`ApiTool` stands for a remote API (QA, virtual environment, chatbot, image, TTS):
it answers a complete call after a duration drawn from its class's (mean, std)
times `scale` (cross-process time is real time, so the table's seconds are
scaled down). The draw is seeded by (seed, task, call index), so a call takes the
same time whichever policy serves it and in whatever order the calls come.
`MathTool` really computes its call (`math(a, op, b)`) and answers at once.

Both validate: the sentence holding the call is delivered only once the tool has
answered, and the generation waits for that suspended (serving/tool_waits.py).
"""

from __future__ import annotations

import time
import zlib
from typing import Any

import numpy as np

from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply

MIN_DURATION_S = 1e-5  # a drawn duration below this (the normal's tail) is clipped


def call_duration_s(
    mean_s: float, std_s: float, scale: float, seed: int, task_id: str, index: int
) -> float:
    """The answer time of call `index` of `task_id`: N(mean, std), clipped, scaled."""
    rng = np.random.default_rng([seed, zlib.crc32(task_id.encode()), index])
    return max(float(rng.normal(mean_s, std_s)), MIN_DURATION_S) * scale


class ApiTool(ToolPlugin):
    """Options: `api` (the skill name it consumes), `mean_s`, `std_s` (the table's,
    unscaled), `scale`, `seed`."""

    validates = True

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.skills = frozenset({str(options["api"])})  # type: ignore[misc]
        self._mean_s = float(options["mean_s"])
        self._std_s = float(options["std_s"])
        self._scale = float(options["scale"])
        self._seed = int(options.get("seed", 0))
        if self._mean_s < 0 or self._std_s < 0 or self._scale <= 0:
            raise ValueError(
                f"api tool {options['api']!r}: need mean_s, std_s >= 0 and scale > 0, "
                f"got {self._mean_s}, {self._std_s}, {self._scale}"
            )

    def on_call(self, call: ToolCall) -> ToolReply:
        duration = call_duration_s(
            self._mean_s, self._std_s, self._scale, self._seed, call.task_id, call.index
        )
        time.sleep(duration)
        return ToolReply.returns(f"{call.skill} answered call {call.index}")


_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
}


class MathTool(ToolPlugin):
    """`math(a, op, b)` with numbers a, b and op one of + - * /: the value."""

    skills = frozenset({"math"})
    validates = True

    def on_call(self, call: ToolCall) -> ToolReply:
        if len(call.args) != 3:
            return ToolReply.error(f"math takes (a, op, b), got {len(call.args)} arguments")
        a, op, b = call.args
        for position, value in ((0, a), (2, b)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return ToolReply.error(f"not a number: {value!r}", argument=position)
        if op not in _OPS:
            return ToolReply.error(f"op must be one of {sorted(_OPS)}, got {op!r}", argument=1)
        assert isinstance(a, int | float) and isinstance(b, int | float)
        if op == "/" and b == 0:
            return ToolReply.error("division by zero", argument=2)
        return ToolReply.returns(_OPS[str(op)](a, b))
