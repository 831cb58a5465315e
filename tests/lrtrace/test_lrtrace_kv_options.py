"""`lrtrace replay --handling-strategy` and `--kv-prefetch`: the replay's service
handles each suspended generation's KV as asked (sim); the ROS target refuses both
(set where it runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from lrtrace import results_format, trace_format
from lrtrace.cli import main
from lrtrace.errors import LrtraceError
from lrtrace.replay.runner import replay
from lrtrace.replay.target import ReplayTarget
from lrtrace.replay.targets import make_target
from lrtrace.replay.targets.common import ReplayServiceOptions
from lrtrace.replay.targets.sim import SimTarget
from timely_core.engine.protocol import HandlingStrategy

PAPER = "paper-llama3-8b-rtx4090"


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
        (run,) = results_format.read(tmp_path / f"{strategy}.json").runs
        assert (run.handling_strategy, run.kv_prefetch) == (strategy, True)  # recorded
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
        (run,) = results_format.read(tmp_path / f"prefetch-{on}.json").runs
        assert (run.handling_strategy, run.kv_prefetch) == ("swap", on)  # recorded
    assert prefetches[False] == 0 < prefetches[True]


def test_a_policy_with_its_own_strategy_records_its_own(tokenizer_path: Path) -> None:
    def sim(options: ReplayServiceOptions) -> ReplayTarget:
        return make_target("sim", PAPER, None, None, 0.008, tokenizer_path, options)

    asked = sim(ReplayServiceOptions(handling_strategy="ttl", kv_prefetch=False))
    assert asked.kv_settings("timely") == ("ttl", False)
    assert asked.kv_settings("vllm-like") == ("discard", False)  # vLLM drops KV
    assert sim(ReplayServiceOptions()).kv_settings("fcfs") == ("auto", True)


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
        with pytest.raises(LrtraceError, match=f"{named} applies to .* set where it runs"):
            make_target("ros", "p", None, None, 0.0, options=options)
    both = ReplayServiceOptions(handling_strategy="swap", kv_prefetch=False)
    with pytest.raises(LrtraceError, match="--handling-strategy, --kv-prefetch apply to"):
        make_target("ros", "p", None, None, 0.0, options=both)
