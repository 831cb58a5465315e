"""Tool plugins (Conveyor): tools that start on a call while it is still being
decoded, each in its own sandboxed process. See README.md in timely_core and
docs/service-api.md ("Tool plugins")."""

from timely_core.tools.channel import MAX_MESSAGE_BYTES
from timely_core.tools.plugin import ArgValue, ToolCall, ToolPlugin, ToolReply, Unresolved
from timely_core.tools.process import ToolStartError
from timely_core.tools.spec import ToolSpec

__all__ = [
    "MAX_MESSAGE_BYTES",
    "ArgValue",
    "ToolCall",
    "ToolPlugin",
    "ToolReply",
    "ToolSpec",
    "ToolStartError",
    "Unresolved",
]
