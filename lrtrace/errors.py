"""The one error type the CLI turns into a single clear line and exit status 2."""

from __future__ import annotations


class LrtraceError(Exception):
    """Bad input to lrtrace (a malformed trace, an unknown trace id or policy, an
    impossible workload). The message is one line that names what was wrong."""
