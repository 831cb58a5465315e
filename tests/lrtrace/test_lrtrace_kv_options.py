"""`lrtrace replay --handling-strategy` and `--kv-prefetch`: the replay's service
handles each suspended generation's KV as asked (sim); the ROS target refuses both
(set where it runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from lrtrace import trace_format
from lrtrace.cli import main
from lrtrace.errors import LrtraceError
from lrtrace.replay.runner import replay
from lrtrace.replay.targets import make_target
from lrtrace.replay.targets.common import ReplayServiceOptions
from lrtrace.replay.targets.sim import SimTarget
from timely_core.engine.protocol import HandlingStrategy


def _replay_sim(
    trace: Path, out: Path, tokenizer: Path, options: ReplayServiceOptions
) -> SimTarget:
    target = make_target(
        "sim",
        profile="paper-llama3-8b-rtx4090",
        model=None,
        threads=None,
        network_latency_s=0.008,
        tokenizer=tokenizer,
        options=options,
    )
    assert isinstance(target, SimTarget)
    replay(trace_format.read(trace), target, ["timely"], [None], out, Console(quiet=True))
    assert target.last_engine is not None
    return target


def test_the_strategy_reaches_the_service_and_the_engine(
    tmp_path: Path, tokenizer_path: Path
) -> None:
    trace = tmp_path / "w.lrt"
    assert main(["compose", "--wid", "1", "--duration", "10", "--seed", "1", "-o", str(trace)]) == 0
    recomputed = {}
    for strategy in ("preserve", "discard"):
        options = ReplayServiceOptions(handling_strategy=strategy)
        target = _replay_sim(trace, tmp_path / f"{strategy}.json", tokenizer_path, options)
        assert target._config.handling_strategy is HandlingStrategy(strategy)
        assert target.last_engine is not None
        recomputed[strategy] = target.last_engine.stats.recomputed_tokens
    assert recomputed["preserve"] == 0 < recomputed["discard"]


def test_kv_prefetch_reaches_the_service(tmp_path: Path, tokenizer_path: Path) -> None:
    """Swapped generations are brought back ahead of their resume only with prefetch on."""
    trace = tmp_path / "w.lrt"
    assert main(["compose", "--wid", "1", "--duration", "10", "--seed", "1", "-o", str(trace)]) == 0
    prefetches = {}
    for on in (True, False):
        options = ReplayServiceOptions(handling_strategy="swap", kv_prefetch=on)
        target = _replay_sim(trace, tmp_path / f"prefetch-{on}.json", tokenizer_path, options)
        assert target._config.kv_prefetch is on
        assert target.last_engine is not None
        prefetches[on] = target.last_engine.stats.prefetches
    assert prefetches[False] == 0 < prefetches[True]


def test_bad_options_and_the_ros_target_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "r.json")
    trace = str(tmp_path / "none.lrt")
    for flag, value in (("--handling-strategy", "keep"), ("--kv-prefetch", "yes")):
        with pytest.raises(SystemExit):
            main(["replay", trace, flag, value, "-o", out])
        assert "invalid choice" in capsys.readouterr().err
    for options, named in (
        (ReplayServiceOptions(handling_strategy="swap"), "--handling-strategy"),
        (ReplayServiceOptions(kv_prefetch=False), "--kv-prefetch"),
    ):
        with pytest.raises(LrtraceError, match=f"{named} apply to .* set where it runs"):
            make_target("ros", "p", None, None, 0.0, options=options)
