"""The 11 tasks of LRTrace (TimelyLLM Table 2), each with its golden plan.

The plans are produced by the same template rules as the training data, so the
golden plan is what the prompt's guidance prescribes for that scene and task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from robot_models.dataset.arm_templates import (
    DESK_PLACES,
    PRODUCE_BINS,
    desk_plan,
    produce_plan,
    stack_plan,
)
from robot_models.dataset.drone_templates import search_plan
from robot_models.dataset.example import Example


@dataclass(frozen=True)
class LRTraceTask:
    trace_id: int
    name: str  # the task as named in Table 2
    robot_type: str
    urgency: Literal["normal", "urgent"]
    scene: str
    instruction: str
    golden_plan: str

    def example(self) -> Example:
        return Example(
            self.robot_type,
            self.scene,
            self.instruction,
            self.golden_plan,
            f"lrtrace{self.trace_id}",
        )


LRTRACE_TASKS: tuple[LRTraceTask, ...] = (
    LRTraceTask(
        1,
        "Look for the cat",
        "drone",
        "normal",
        "visible: sofa, lamp, rug",
        "Look for the cat",
        search_plan("cat"),
    ),
    LRTraceTask(
        2,
        "Check for keys or wallets",
        "drone",
        "normal",
        "visible: door, shelf, plant",
        "Check for keys or wallets",
        "?sw('keys')==True{tp();->True;}?sw('wallets')==True{tp();->True;}->False;",
    ),
    LRTraceTask(
        3,
        "Check the book on the cabinet",
        "drone",
        "normal",
        "visible: chair, window",
        "Check the book on the cabinet",
        "?sw('cabinet')==True{o('cabinet');a('cabinet');?iv('book')==True{tp();}}",
    ),
    LRTraceTask(
        4,
        "Find a toy under the bed",
        "drone",
        "normal",
        "visible: desk, lamp, curtain",
        "Find a toy under the bed",
        "?sw('bed')==True{a('bed');md(50);?iv('toy')==True{tp();}mu(50);}",
    ),
    LRTraceTask(
        5,
        "Find a tool for cutting paper",
        "drone",
        "normal",
        "visible: desk, chair",
        "Find a tool for cutting paper",
        search_plan("scissors"),
    ),
    LRTraceTask(
        6,
        "Avoiding human injury",
        "drone",
        "urgent",
        "visible: person, door, table",
        "A person is walking into the drone from the front, avoid hurting them",
        "mb(100);mu(50);",
    ),
    LRTraceTask(
        7,
        "Preventing potential collision",
        "drone",
        "urgent",
        "visible: wall, lamp",
        "A wall is 30 cm ahead, prevent a collision",
        "mb(80);",
    ),
    LRTraceTask(
        8,
        "Evading animal pursuit",
        "drone",
        "urgent",
        "visible: dog, sofa",
        "A dog is chasing the drone, get away",
        "mu(150);tc(180);mf(200);",
    ),
    LRTraceTask(
        9,
        "Object stacking",
        "arm",
        "normal",
        "on table: green block, red block, yellow block, white block, blue block",
        "Stack the blocks with red at the bottom, then blue, then green, then yellow, then white",
        stack_plan(["red block", "blue block", "green block", "yellow block", "white block"]),
    ),
    LRTraceTask(
        10,
        "Desk cleaning",
        "arm",
        "normal",
        f"on table: cup, pen, paper, book, marker, plate; {DESK_PLACES}",
        "Clean the desk",
        desk_plan(["cup", "pen", "paper", "book", "marker", "plate"]),
    ),
    LRTraceTask(
        11,
        "Fruit and vegetable classification",
        "arm",
        "normal",
        f"on table: apple, carrot, banana, potato, orange, onion; {PRODUCE_BINS}",
        "Sort the fruit and vegetables into the bins",
        produce_plan(["apple", "carrot", "banana", "potato", "orange", "onion"]),
    ),
)


def lrtrace_task(trace_id: int) -> LRTraceTask:
    """The LRTrace task with this id (1..11)."""
    for task in LRTRACE_TASKS:
        if task.trace_id == trace_id:
            return task
    raise ValueError(f"unknown LRTrace trace id {trace_id!r}; known ids: 1..{len(LRTRACE_TASKS)}")
