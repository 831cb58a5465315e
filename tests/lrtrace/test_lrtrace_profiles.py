"""Latency profiles: the paper profile reproduces Table 1, the fit recovers known
coefficients, and profile-engine measures the real TorchEngine into a usable profile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lrtrace.cli import main
from lrtrace.errors import LrtraceError
from lrtrace.profile_engine import ProfilePlan, StepSample, fit, measure, profile_from
from lrtrace.profiles import PAPER_PROFILE, PROFILE_DIR, LatencyProfile, available, load
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090, LatencyModel


def test_paper_profile_reproduces_table_1() -> None:
    assert PAPER_PROFILE.iteration_seconds(2884, 0, 0) == pytest.approx(0.328, rel=1e-3)
    assert PAPER_PROFILE.iteration_seconds(0, 1, 2900) == pytest.approx(0.022, rel=0.01)
    assert load(PAPER_PROFILE.name) == PAPER_PROFILE
    # One definition: the profile is the simulated engine's paper model, not a copy.
    fields = LatencyModel.model_fields
    assert LatencyModel(**PAPER_PROFILE.model_dump(include=set(fields))) == PAPER_LLAMA3_8B_RTX4090
    assert isinstance(PAPER_PROFILE, LatencyModel)
    assert not (PROFILE_DIR / f"{PAPER_PROFILE.name}.json").exists()


def test_fit_recovers_coefficients() -> None:
    rng = np.random.default_rng(0)
    true = (0.004, 2e-5, 3e-4, 1e-7)
    samples = []
    for _ in range(40):
        p, d, c = int(rng.integers(0, 600)), int(rng.integers(0, 16)), int(rng.integers(0, 8000))
        samples.append(StepSample(p, d, c, true[0] + true[1] * p + true[2] * d + true[3] * c))
    coef, rel = fit(samples)
    assert coef == pytest.approx(true, rel=1e-6)
    assert rel.max() < 1e-9


def test_fit_never_returns_negative_costs() -> None:
    # Time falling with context would need a negative coefficient: it is clamped to 0.
    samples = [StepSample(0, 1, c, 0.01 - 1e-7 * c) for c in (100, 1000, 5000, 9000)]
    coef, _ = fit(samples)
    assert (coef >= 0).all() and coef[3] == 0


def test_bad_profile_file(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text('{"name": "x"}')
    with pytest.raises(LrtraceError, match="invalid profile"):
        load(str(path))
    with pytest.raises(LrtraceError, match="unknown latency profile"):
        load("no-such-profile")
    assert PAPER_PROFILE.name in available()


def test_profile_engine_on_the_real_torch_engine(tmp_path: Path, tiny_llama: Path) -> None:
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine

    engine = TorchEngine(tiny_llama, EngineConfig(num_threads=1))
    plan = ProfilePlan(
        prefill_lengths=(16, 64), batch_sizes=(1, 3), contexts=(32,), repeats=1, decode_steps=2
    )
    samples = measure(engine, 256, plan, lambda _msg: None)
    assert engine.memory().device_blocks_free == engine.memory().device_blocks_total
    assert {s.prefill_tokens for s in samples if s.decodes == 0} == {16, 64}
    assert {s.decodes for s in samples if s.prefill_tokens == 0} >= {1, 3}
    assert all(s.seconds > 0 for s in samples)
    profile = profile_from("t", "tiny", samples, 4096, 2048)
    assert profile.source == "measured" and profile.samples == len(samples)
    assert profile.rel_error_p50 is not None
    # and through the CLI, written where asked and loadable by the simulator
    out = tmp_path / "measured.json"
    argv = ["profile-engine", "--model", str(tiny_llama), "--name", "tiny-cpu", "--out", str(out)]
    argv += ["--prefix-tokens", "40", "--service-duration", "0"]  # no tokenizer: no service
    assert main([*argv, "--repeats", "1", "--threads", "1"]) == 0
    loaded = LatencyProfile.model_validate_json(out.read_text())
    assert loaded.name == "tiny-cpu" and loaded.kv_bytes_per_token == 2 * 2 * 16 * 2 * 4
    assert loaded.service_overhead_s == 0.0
    assert main([*argv[:-2], "--service-duration", "-1"]) == 2
    assert "shared 40-token prefix" in loaded.description
    assert loaded.iteration_seconds(64, 2, 200) > 0


def test_profile_engine_in_the_served_regime(tiny_llama: Path) -> None:
    """Prompts after a registered prefix, as the service runs them: prefill counts only
    what the engine computes (the request; the prefix's partial last block is copied)."""
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine

    engine = TorchEngine(tiny_llama, EngineConfig(num_threads=1, block_size=16))
    plan = ProfilePlan(
        prefix_tokens=40,
        request_tokens=8,
        served_prefill_batches=(1, 2),
        served_decode_batches=(1, 3),
        repeats=1,
        decode_steps=2,
    )
    samples = measure(engine, 256, plan, lambda _msg: None)
    prefills = [s for s in samples if s.decodes == 0]
    assert [(s.prefill_tokens, s.context_tokens) for s in prefills] == [(8, 48), (16, 96)]
    decodes = [s for s in samples if s.prefill_tokens == 0]
    assert {s.decodes for s in decodes} >= {1, 3}
    assert all(s.context_tokens > s.decodes * 48 for s in decodes)
    mixed = [s for s in samples if s.decodes and s.prefill_tokens]
    assert mixed and all(s.prefill_tokens == 8 for s in mixed)
    memory = engine.memory()  # every generation discarded, the prefix unregistered
    assert memory.device_blocks_free == memory.device_blocks_total
    assert memory.pinned_prefix_blocks == 0


def test_service_overhead_is_part_of_every_simulated_iteration() -> None:
    plain = PAPER_PROFILE.model_copy(update={"name": "plain"})
    loaded = PAPER_PROFILE.model_copy(update={"name": "loaded", "service_overhead_s": 0.002})
    assert loaded.iteration_seconds(0, 1, 100) == pytest.approx(
        plain.iteration_seconds(0, 1, 100) + 0.002
    )
    assert loaded.iteration_seconds(0, 0, 0) == 0.0  # an empty step costs nothing
