"""`lrtrace replay --handling-strategy`: the replay's service handles each suspended
generation's KV as asked (sim); the ROS target refuses it (set where it runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from lrtrace import trace_format
from lrtrace.cli import main
from lrtrace.errors import LrtraceError
from lrtrace.replay.runner import replay
from lrtrace.replay.targets import make_target
from lrtrace.replay.targets.sim import SimTarget
from timely_core.engine.protocol import HandlingStrategy


def test_the_strategy_reaches_the_service_and_the_engine(
    tmp_path: Path, tokenizer_path: Path
) -> None:
    trace = tmp_path / "w.lrt"
    assert main(["compose", "--wid", "1", "--duration", "10", "--seed", "1", "-o", str(trace)]) == 0
    recomputed = {}
    for strategy in ("preserve", "discard"):
        target = make_target(
            "sim",
            profile="paper-llama3-8b-rtx4090",
            model=None,
            threads=None,
            network_latency_s=0.008,
            tokenizer=tokenizer_path,
            handling_strategy=strategy,
        )
        assert isinstance(target, SimTarget)
        assert target._config.handling_strategy is HandlingStrategy(strategy)
        out = tmp_path / f"{strategy}.json"
        replay(trace_format.read(trace), target, ["timely"], [None], out, Console(quiet=True))
        assert target.last_engine is not None
        recomputed[strategy] = target.last_engine.stats.recomputed_tokens
    assert recomputed["preserve"] == 0 < recomputed["discard"]


def test_bad_strategies_and_the_ros_target_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "r.json")
    trace = str(tmp_path / "none.lrt")
    with pytest.raises(SystemExit):
        main(["replay", trace, "--handling-strategy", "keep", "-o", out])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(LrtraceError, match="set where it runs"):
        make_target("ros", "p", None, None, 0.0, handling_strategy="swap")
