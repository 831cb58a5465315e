"""How a caller registers a tool for a robot: `ToolSpec` (pydantic, external input)."""

from __future__ import annotations

from typing import Any

import msgpack
from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_MEMORY_MB = 1024
DEFAULT_CPU_S = 2.0
DEFAULT_WALL_S = 5.0


class ToolSpec(BaseModel):
    """A plugin to run for a robot's generations, in its own process.

    `plugin` is "package.module:ClassName" of a `ToolPlugin` subclass, importable
    with the service's sys.path. Limits: `cpu_s` CPU seconds and `wall_s` wall
    seconds per call (the process is killed past either and restarted; the call
    ends with an error), `memory_mb` of address space for the whole process. A
    plugin runs in a new network namespace (no network, not even loopback) unless
    `network` is True. Strict types: a `true` is no wall time, a "2048" no size."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    plugin: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    options: dict[str, Any] = Field(default_factory=dict)  # handed to the plugin (msgpack)
    network: bool = False
    # False hands only complete calls, even to a plugin that acts on partial ones
    # (a baseline, or a plugin whose partial work is not wanted for this robot)
    partial_calls: bool = True
    # Plans that react: the tool's observations are appended to the generation (each
    # on a line of its own) before it goes on. Needs a validating tool (its answer is
    # there before the statement goes out) and an engine that can rewrite
    # (`RewritableEngine`); the planner must have been trained on them.
    append_observations: bool = False
    cpu_s: float = Field(default=DEFAULT_CPU_S, gt=0, le=3600, allow_inf_nan=False)
    wall_s: float = Field(default=DEFAULT_WALL_S, gt=0, le=3600, allow_inf_nan=False)
    memory_mb: int = Field(default=DEFAULT_MEMORY_MB, ge=64, le=1 << 20)
    # Seconds a call usually takes to answer: the prior of the tool's answer-time
    # statistics (answer_times.py) until its first reply is measured. None: no
    # prediction before then.
    expected_s: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)

    @field_validator("options")
    @classmethod
    def _options_travel(cls, options: dict[str, Any]) -> dict[str, Any]:
        """The options go to the tool's process as msgpack: refused here, not there."""
        try:
            msgpack.packb(options, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(
                f"cannot be sent to the tool's process (msgpack: {exc}); use str, int, "
                "float, bool, None, lists and maps of them"
            ) from None
        return options
