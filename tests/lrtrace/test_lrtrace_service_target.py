"""The in-process target on the real TorchEngine and the monotonic clock: the real-time
event loop, the service thread and the simulated robots together. The model is a
random-weight Llama, so its "plans" are invalid: every task must still end, with the
service's error, and nothing may hang. (Valid plans are asserted on the simulator.)"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.replay.exec_sampler import ExecTimeSampler
from lrtrace.replay.targets.service import ServiceTarget
from lrtrace.results_format import TaskRecord
from lrtrace.workload import WorkloadSpec
from timely_core.service_config import ServiceConfig


def ended_by(ended: list[str]) -> Callable[[TaskRecord], None]:
    return lambda r: ended.append(r.task_id)


def test_real_clock_replay_ends_every_task(llama_for_tokenizer: Path, tokenizer: Any) -> None:
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine

    engine = TorchEngine(llama_for_tokenizer, EngineConfig(num_threads=1))
    # random weights write invalid plans on purpose: no grammar to make them valid
    config = ServiceConfig(max_tokens=24, max_segment_tokens=8, grammar=False)
    target = ServiceTarget(engine, tokenizer, ExecTimeSampler(), "torch:tiny", 0.008, config)
    spec = WorkloadSpec(eps=4.0, max_tpe=3, trace_ids=(1, 6, 9), agents=3, duration_s=1.0, seed=4)
    trace = compose(spec, load_catalog())
    assert trace.tasks
    for policy in ("timely", "fcfs"):
        records: list[TaskRecord] = []
        ended: list[str] = []
        busy = target.run(trace, policy, None, records, ended_by(ended), threading.Event())
        assert busy is not None and busy > 0  # the engine ran iterations
        assert [r.task_id for r in records] == [t.task_id for t in trace.tasks]
        assert sorted(ended) == sorted(r.task_id for r in records)
        for r in records:
            assert r.finished and not r.success and r.error, r
        memory = engine.memory()  # every generation's KV was freed
        assert memory.device_blocks_free == memory.device_blocks_total - memory.pinned_prefix_blocks


def test_stop_cancels_open_tasks(llama_for_tokenizer: Path, tokenizer: Any) -> None:
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine

    engine = TorchEngine(llama_for_tokenizer, EngineConfig(num_threads=1))
    target = ServiceTarget(engine, tokenizer, ExecTimeSampler(), "torch:tiny")
    spec = WorkloadSpec(eps=0.5, max_tpe=1, trace_ids=(1,), agents=1, duration_s=60.0, seed=1)
    trace = compose(spec, load_catalog())
    stop = threading.Event()
    stop.set()  # as if Ctrl-C came at once: nothing is left running
    records: list[TaskRecord] = []
    target.run(trace, "timely", None, records, lambda r: None, stop)
    assert len(records) == len(trace.tasks)
    assert all(not r.finished and r.error == "interrupted" for r in records)


def test_service_overhead_is_measured_per_policy(llama_for_tokenizer: Path, tokenizer: Any) -> None:
    """The service's own time per iteration, from a short replay on the real engine."""
    from lrtrace.service_overhead import describe, measure_overhead, workload
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine

    engine = TorchEngine(llama_for_tokenizer, EngineConfig(num_threads=1))
    # random weights write invalid plans on purpose: no grammar to make them valid
    config = ServiceConfig(max_tokens=24, max_segment_tokens=8, grammar=False)
    target = ServiceTarget(engine, tokenizer, ExecTimeSampler(), "torch:tiny", 0.008, config)
    spec = workload(eps=4.0, duration_s=1.0)
    samples = measure_overhead(target, spec)
    assert [s.policy for s in samples] == ["fcfs", "timely"]
    for s in samples:
        assert s.iterations > 0 and s.engine_busy_s > 0
        assert s.loop_busy_s >= s.engine_busy_s  # the loop waits for the engine, then more
        assert s.per_iteration_s > 0
    assert "fcfs" in describe(samples, spec) and "4 events/s" in describe(samples, spec)


def test_the_recorded_batch_cap_is_what_the_engine_runs(
    llama_for_tokenizer: Path, tokenizer: Any
) -> None:
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine

    engine = TorchEngine(llama_for_tokenizer, EngineConfig(num_threads=1, max_generations=4))
    target = ServiceTarget(engine, tokenizer, ExecTimeSampler(), "torch:tiny")
    assert target.batch_cap(16) == 4  # the service clamps a cap to max_generations
    assert target.batch_cap(None) == 4  # its default (32) too
    assert target.batch_cap(2) == 2
