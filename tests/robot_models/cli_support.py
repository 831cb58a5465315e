"""The error line of a `python -m robot_models.<command>` refused at its options."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def refusal(
    main: Callable[[list[str]], object], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> str:
    """The one error line `main(argv)` exits with (status 2, no traceback)."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]
