"""The `timely` command's entry point. A Ctrl-C that comes while the command is
still importing (ROS, torch: most of its first second) or parsing its arguments
ends it with status 130 and no traceback, as one later does."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from timely_ros.cli import main as run

        return run(sys.argv[1:])
    except KeyboardInterrupt:
        return 130
