"""Core events -> ROS 2 messages."""

from __future__ import annotations

from typing import Any

from builtin_interfaces.msg import Time
from timely_interfaces.msg import Segment as SegmentMsg
from timely_interfaces.msg import Skill as SkillMsg

from timely_core.events import Segment, StreamedElement
from timely_ros.skill_text import call_text, expr_text


def skill_msgs(segment: Segment) -> list[SkillMsg]:
    """Every skill call of the segment's statements, in source order.

    For display and up-front checks: the robot runs the segment's text, which keeps
    the control flow (see `segment_runner`).
    """
    out: list[SkillMsg] = []
    for statement in segment.statements:
        calls: Any = getattr(statement, "calls", ())
        for call in calls:
            out.append(
                SkillMsg(
                    name=call.name,
                    args=[expr_text(a) for a in call.args],
                    raw_text=call_text(call),
                )
            )
    return out


def element_msg(element: StreamedElement, stamp: Time) -> SegmentMsg:
    """One element of a streamed call as a goal of its own: a bare call (no plan
    text), which the robot runs as it is, e.g. `fp(100,0,50)`."""
    name, _, rest = element.text.partition("(")
    args = [a for a in rest.removesuffix(")").split(",") if a]
    return SegmentMsg(
        task_id=element.task_id,
        robot_id=element.robot_id,
        index=element.index,
        skills=[SkillMsg(name=name, args=args, raw_text=element.text)],
        text="",
        stamp=stamp,
    )


def segment_msg(segment: Segment, stamp: Time) -> SegmentMsg:
    return SegmentMsg(
        task_id=segment.task_id,
        robot_id=segment.robot_id,
        index=segment.index,
        skills=skill_msgs(segment),
        text=segment.text,
        estimated_execution_s=float(segment.estimated_execution_s),
        final=segment.final,
        stamp=stamp,
    )
