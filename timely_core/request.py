"""A robot's planning request, validated at the edge (pydantic) with clear errors."""

from __future__ import annotations

import unicodedata

from pydantic import BaseModel, ConfigDict, Field, field_validator

from timely_core.scheduling.tuf import Tuf

MAX_INSTRUCTION_CHARS = 2000
MAX_SCENE_CHARS = 8000
_JOINERS = "\u200c\u200d"
ROBOT_ID_PATTERN = r"^[A-Za-z0-9_]+$"


class TaskRequest(BaseModel):
    """ "Plan this task" for one registered robot, with its time-utility requirement.

    `task_id` is optional: the service assigns a unique one when it is empty.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    # strict: bytes or numbers for a text, "yes" for a flag are a caller's mistake
    robot_id: str = Field(min_length=1, max_length=64, pattern=ROBOT_ID_PATTERN, strict=True)
    instruction: str = Field(min_length=1, max_length=MAX_INSTRUCTION_CHARS, strict=True)
    scene: str = Field(default="", max_length=MAX_SCENE_CHARS, strict=True)
    tuf: Tuf = Field(default_factory=Tuf.normal)
    task_id: str = Field(default="", max_length=128, strict=True)
    # Plans that react: a segment the robot reports failed (`segment_failed`) rolls
    # the generation back to that segment's end, appends the failure as an
    # observation and generation goes on (up to `ServiceConfig.max_recoveries`).
    # False: the robot's failure ends the task, as before.
    replan_on_failure: bool = Field(default=False, strict=True)
    # The result waits for the robot's report of its last segment (`segment_done`,
    # `segment_failed`): a caller that holds segments after the plan was decoded (a
    # robot busy with another task, an operator's approval) and reports each start
    # (`segment_started`) then gets them counted in the response and waiting times
    # and the utility, with the robot's real execution. Only for a caller that
    # reports every segment's end. False: the result comes when the plan is decoded.
    result_after_reports: bool = Field(default=False, strict=True)

    @field_validator("instruction", "scene")
    @classmethod
    def _printable(cls, text: str) -> str:
        return check_printable(text)

    @field_validator("task_id")
    @classmethod
    def _one_line(cls, task_id: str) -> str:
        """An id is logged, published and matched: printable, on one line."""
        check_printable(task_id)
        for position, char in enumerate(task_id):
            if char in "\t\n\r":
                raise ValueError(
                    f"{char!r} at position {position}; a task id is one line without tabs"
                )
        return task_id


def check_printable(text: str) -> str:
    """Tabs and line breaks are text; other control characters are not, and some
    have a meaning inside the planner's tokenizer (its number place marks).
    Invisible format characters (bidirectional overrides such as U+202E,
    zero-width spaces) make the text read otherwise than it is planned; the
    joiners U+200C and U+200D, which some scripts need, are text."""
    for position, char in enumerate(text):
        category = unicodedata.category(char)
        if char not in "\t\n\r" and category == "Cc":
            raise ValueError(
                f"control character U+{ord(char):04X} at position {position}; "
                "only printable text, tabs and line breaks are allowed"
            )
        if category == "Cf" and char not in _JOINERS:
            raise ValueError(
                f"invisible format character U+{ord(char):04X} at position "
                f"{position}; only printable text, tabs and line breaks are allowed"
            )
    return text


class SceneUpdate(BaseModel):
    """What a robot currently perceives, published ahead of its tasks
    (`PlanningService.publish_scene`); an empty scene withdraws the last one."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    robot_id: str = Field(min_length=1, max_length=64, pattern=ROBOT_ID_PATTERN)
    scene: str = Field(default="", max_length=MAX_SCENE_CHARS)

    @field_validator("scene")
    @classmethod
    def _printable(cls, text: str) -> str:
        return check_printable(text)
