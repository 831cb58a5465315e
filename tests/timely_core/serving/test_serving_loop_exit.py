"""A program that exits while the service's loop is inside an engine step, without
`stop()`: the loop is stopped at interpreter exit and the process ends cleanly
(torch segfaulted when the daemon thread ran on into the interpreter's teardown)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROGRAM = textwrap.dedent(
    """
    import time
    from robot_models.language import load_language
    from timely_core import PlanningService, TaskRequest
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine
    from timely_core.engine.torch.loader import load_tokenizer

    planner = "robot_models/checkpoints/planner"
    service = PlanningService(
        TorchEngine(planner, EngineConfig(num_threads=1)),
        load_tokenizer(planner),
        languages={"arm": load_language("arm")},
    )
    service.register_robot("arm1", robot_type="arm")
    service.start()
    service.submit(TaskRequest(robot_id="arm1", instruction="put the cup on the tray",
                               scene="a cup, a tray", result_after_reports=True))
    time.sleep(0.02)  # the loop is decoding: leave without stop()
    """
)


def test_a_program_that_exits_without_stop_ends_cleanly() -> None:
    for _ in range(3):  # the crash came in most exits, not all
        done = subprocess.run(
            [sys.executable, "-c", PROGRAM],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
