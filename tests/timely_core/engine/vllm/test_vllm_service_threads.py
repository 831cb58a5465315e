"""`VllmConfig.num_threads`: the service steps the in-process vLLM engine from its
own loop thread, not the thread that built it (and whose OpenMP threads vLLM bound).
Run in a child process so the binding and `OMP_NUM_THREADS` do not reach the other
tests' engines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
PROBE = """
import json, sys
sys.path.insert(0, {testkit!r})
from vllm_testkit import PLANNER, plan_with_service
from timely_core.engine.vllm.config import VllmConfig
from timely_core.engine.vllm.engine import VllmEngine
engine = VllmEngine(PLANNER, VllmConfig(num_threads={threads}, max_num_seqs=8))
failures, stats = plan_with_service(engine, 4)
engine.close()
print("RESULT " + json.dumps({{"failures": failures, "succeeded": stats.succeeded}}))
"""


@pytest.mark.parametrize("inherited", ["", "2"])
def test_a_service_steps_an_engine_built_with_one_thread(inherited: str) -> None:
    env = dict(os.environ)  # the session's vLLM cache (conftest)
    env.pop("OMP_NUM_THREADS", None)
    if inherited:  # the operator's environment says otherwise before torch starts
        env["OMP_NUM_THREADS"] = inherited
    code = PROBE.format(testkit=str(Path(__file__).parent), threads=1)
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result == {"failures": [], "succeeded": 4}
