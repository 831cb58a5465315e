"""bench/vllm_gpu_payload.py's run.sh: valid bash, within one device call's limit, and
each run it names selects exactly one of bench/vllm_gpu.py's GPU configurations (a
run that matched two spent a lease on the wrong one); every GPU configuration can be
selected alone by its label's first word."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from vllm_gpu import configurations  # noqa: E402
from vllm_gpu_payload import RUN_SH, RUNS  # noqa: E402

DEVICE_CALL_S = 600  # the longest command the lent GPU machines run


def test_run_sh_is_bash_and_each_run_selects_one_gpu_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the GPU configurations widen the planner into a temporary folder: this test's
    monkeypatch.setattr(tempfile, "mkdtemp", lambda prefix: str(tmp_path / prefix))
    script = tmp_path / "run.sh"
    script.write_text(RUN_SH.format(runs=RUNS))
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    labels = [label for label, _, _ in configurations(True, 0.3)]
    runs = [pair.split(":") for pair in RUNS.split()]
    assert sum(int(seconds) for _, seconds in runs) < DEVICE_CALL_S  # staging needs some
    for start, _ in runs:
        assert sum(label.startswith(start) for label in labels) == 1, start
    for label in labels:
        first = label.split()[0]
        assert [other for other in labels if other.startswith(first)] == [label]
