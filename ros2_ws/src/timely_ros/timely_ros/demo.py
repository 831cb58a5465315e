"""`timely demo` (what `make run` runs): the planner and a simulated fleet of drones
and arms composed in this process, a short WID 1-style workload (Poisson events of
1..4 tasks on distinct robots, LRTrace tasks 1-11, mixed urgent and normal) replayed
through real ROS 2 PlanTask goals, and the utility / response / waiting table per
task type. The engine is the torch engine on the embedded planner checkpoint, so
every plan is decoded for real on this CPU; with `engine: simulated` in the config
it is the simulated engine paced by TimelyLLM's Llama3-8B/RTX 4090 latency profile.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from timely_ros.config import BringupConfig, load_bringup

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "config" / "demo.yaml"


def _config_path(config_path: str | None) -> Path:
    if config_path:
        return Path(config_path)
    if DEFAULT_CONFIG.is_file():
        return DEFAULT_CONFIG
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory("timely_ros")) / "config" / "demo.yaml"


def _with_tokenizer(config: BringupConfig, tmp: Path) -> BringupConfig:
    """Point the planner at a tokenizer if the checkpoint is not trained yet."""
    from timely_ros.checkpoint import planner_checkpoint
    from timely_ros.service_factory import resolve_model_path

    assert config.planner is not None
    try:
        resolve_model_path(config.planner.model_path)
        return config
    except ValueError:
        path = planner_checkpoint(tmp)
        print(f"(no planner checkpoint yet: using a tokenizer trained on the data set, {path})")
        planner = config.planner.model_copy(update={"model_path": str(path)})
        return config.model_copy(update={"planner": planner})


def run_demo(config_path: str | None, duration_s: float, seed: int) -> int:
    os.environ.setdefault("FASTDDS_BUILTIN_TRANSPORTS", "SHM")  # no network traffic
    import rclpy
    from rclpy.signals import SignalHandlerOptions
    from rich.console import Console

    from lrtrace.catalog import load_catalog
    from lrtrace.compose import compose
    from lrtrace.report import print_report
    from lrtrace.results_format import ResultsFile, RunRecord
    from lrtrace.workload import WorkloadSpec
    from timely_ros.bringup import make_nodes, spin
    from timely_ros.replay_target import replay
    from timely_ros.stop_signals import StopSignals

    console = Console(width=max(Console().width, 150))
    config = load_bringup(_config_path(config_path))
    planner = config.planner
    if planner is None:
        console.print("timely demo: the config has no timely_planner")
        return 2
    agents = {r.id for r in planner.robots}
    per_type = min(sum(1 for r in planner.robots if r.type == t) for t in ("drone", "arm"))
    spec = WorkloadSpec(
        name="WID1-short (ROS 2)",
        eps=0.6,
        max_tpe=min(4, per_type),
        trace_ids=tuple(range(1, 12)),
        agents=per_type,
        duration_s=duration_s,
        seed=seed,
    )
    trace = compose(spec, load_catalog())
    missing = {t.agent_id for t in trace.tasks} - agents
    if missing:
        console.print(f"timely demo: the config lacks robots {sorted(missing)}")
        return 2
    with StopSignals() as signals, tempfile.TemporaryDirectory(prefix="timely_demo_") as tmp:
        config = _with_tokenizer(config, Path(tmp))
        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # StopSignals owns them
        done = threading.Event()
        spinner: threading.Thread | None = None
        records: list = []
        try:
            nodes = make_nodes(config)
            spinner = threading.Thread(target=spin, args=(nodes, done.is_set), daemon=True)
            spinner.start()
            console.print(
                f"planner + {len(config.executors)} simulated robots up; replaying "
                f"{len(trace.tasks)} tasks over {duration_s:g} s through PlanTask goals "
                "(Ctrl-C stops)"
            )
            started = time.monotonic()
            if not signals.requested:
                replay(  # Ctrl-C: it cancels the goals still running and returns
                    trace=trace,
                    policy=planner.policy,
                    records=records,
                    on_task_done=lambda r: console.print(
                        f"  {r.task_id} trace {r.trace_id:2d} {r.urgency:6s} on {r.agent_id}: "
                        f"{'ok' if r.success else 'FAILED ' + r.error}"
                    ),
                    stop=signals.event,
                )
            wall = time.monotonic() - started
        finally:
            done.set()
            if spinner is not None:
                spinner.join(timeout=15)  # the nodes are destroyed by then
            rclpy.try_shutdown()
    for record in records:
        if signals.requested and not record.finished and not record.error:
            record.error = "interrupted"
    run = RunRecord(
        label=planner.policy,
        policy=planner.policy,
        target="ros",
        engine=f"ros:{planner.engine}",
        simulated=False,
        wall_s=wall,
        tasks=records,
        interrupted=signals.requested,
    )
    results = ResultsFile(workload=spec, runs=[run])
    print_report(results, console, groups="all")
    failed = [r for r in records if not r.success]
    modelled = ", latency modelled on Llama3-8B/RTX 4090" if planner.engine == "simulated" else ""
    console.print(
        f"{len(records) - len(failed)}/{len(records)} tasks succeeded in {wall:.1f} s "
        f"(engine: {planner.engine}{modelled})"
    )
    if signals.requested:
        finished = sum(1 for r in records if r.finished)
        console.print(
            f"timely demo: stopped ({signals.received[0]}): {finished} of {len(records)} tasks "
            "had ended; the goals still running were cancelled"
        )
        return 130
    return 0 if not failed else 1
