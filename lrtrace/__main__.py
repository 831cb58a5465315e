"""`python -m lrtrace`: the `lrtrace` console script's entry point, for a venv whose
scripts are not on PATH."""

from __future__ import annotations

import sys

from lrtrace.cli import main

if __name__ == "__main__":
    sys.exit(main())
