"""Timely's serving core: many robots' planning requests on one engine, generated in
segments and scheduled by time utility (TimelyLLM).

The public face lives at the top of the package and is re-exported here; the rooms
below it follow a request: `serving/` (the service's parts), `scheduling/` (TUFs,
priorities, policies), `language/` (plan languages, segmentation) and `engine/`
(the `Engine` protocol, the torch engine, the simulator). See README.md beside
this file and docs/service-api.md.
"""

from timely_core.clock import Clock, MonotonicClock, VirtualClock
from timely_core.engine.protocol import Engine, HandlingStrategy
from timely_core.errors import (
    DuplicateTask,
    PromptTooLong,
    QueueFull,
    ServiceError,
    ServiceStopped,
    TaskFinished,
    UnknownPolicy,
    UnknownRobot,
    UnknownRobotType,
    UnknownTask,
    VariantUnavailable,
)
from timely_core.events import Rollback, Segment, StreamedElement, TaskResult
from timely_core.language.plan_language import PlanLanguage
from timely_core.request import SceneUpdate, TaskRequest
from timely_core.scheduling.policies import POLICY_NAMES
from timely_core.scheduling.tuf import Tuf
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.stats import ServiceStats
from timely_core.task_handle import TaskHandle

__all__ = [
    "POLICY_NAMES",
    "Clock",
    "DuplicateTask",
    "Engine",
    "HandlingStrategy",
    "MonotonicClock",
    "PlanLanguage",
    "PlanningService",
    "PromptTooLong",
    "QueueFull",
    "Rollback",
    "SceneUpdate",
    "Segment",
    "ServiceConfig",
    "ServiceError",
    "ServiceStats",
    "ServiceStopped",
    "StreamedElement",
    "TaskFinished",
    "TaskHandle",
    "TaskRequest",
    "TaskResult",
    "Tuf",
    "UnknownPolicy",
    "UnknownRobot",
    "UnknownRobotType",
    "UnknownTask",
    "VariantUnavailable",
    "VirtualClock",
]
