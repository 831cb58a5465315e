"""Skill-execution backends of the skill-executor node."""

from __future__ import annotations

from timely_ros.backends.base import Backend, Progress, SkillFailed
from timely_ros.config import ExecutorParams


def make_backend(params: ExecutorParams) -> Backend:
    """The backend named by the executor's `backend` parameter."""
    if params.backend == "tello":
        from timely_ros.backends.tello import TelloBackend

        return TelloBackend(params)
    from timely_ros.backends.sim import SimBackend

    return SimBackend(params)


__all__ = ["Backend", "Progress", "SkillFailed", "make_backend"]
