"""`python -m lrtrace` is the `lrtrace` console script."""

from __future__ import annotations

import subprocess
import sys


def test_python_dash_m_lrtrace_shows_the_cli_usage() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lrtrace", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: lrtrace "), done.stdout
    assert "compose" in done.stdout and "replay" in done.stdout


def test_python_dash_m_lrtrace_exits_as_the_cli_does() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lrtrace", "replay", "missing.lrt", "-o", "r.json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr.startswith("lrtrace: error: cannot read trace")
