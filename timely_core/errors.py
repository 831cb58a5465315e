"""Errors the PlanningService raises to its callers; each message names what was wrong.

All derive from `ServiceError` so a caller (the ROS 2 node, the replay tool) can
turn any of them into a rejected goal with one `except`.
"""

from __future__ import annotations


class ServiceError(Exception):
    """Base of every documented PlanningService error."""


class UnknownRobot(ServiceError):
    """A request named a robot id that was never registered."""


class UnknownRobotType(ServiceError):
    """A robot was registered with a robot type the service has no plan language for."""


class UnknownPolicy(ServiceError):
    """A policy name that is not one of the selectable policies."""


class QueueFull(ServiceError):
    """The bounded queue of pending tasks is full; the request was not accepted."""


class UnknownTask(ServiceError):
    """An operation named a task id the service never accepted."""


class TaskFinished(ServiceError):
    """An operation (cancel) named a task that has already ended."""


class PromptTooLong(ServiceError):
    """The tokenized prompt (prefix + scene + instruction) exceeds the service limit."""


class ServiceStopped(ServiceError):
    """submit() after stop()."""


class DuplicateTask(ServiceError):
    """A request reused the task id of an earlier request."""


class VariantUnavailable(ServiceError):
    """A robot named a fleet variant (LoRA adapter) the engine has not loaded, or the
    engine serves no variants at all."""


MESSAGE_CHARS = 500  # of text from outside (a robot's or a tool's) quoted in an error


def one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    """`text` on one line (whitespace runs as one space) and at most `limit`
    characters, marked when cut: errors quote robots, tools and engines, whose text
    can be long or span lines, and a task's error must stay a readable line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else f"{flat[: limit - 3]}..."
