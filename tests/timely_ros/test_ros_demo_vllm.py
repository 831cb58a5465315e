"""`timely demo` with the shipped vLLM config (sim_fleet_vllm.yaml): the planner on
vLLM's engine in process (the CPU build) and the simulated fleet over ROS 2 complete
a short workload, its plans decoded under the robots' grammars (vLLM's grammar
processor, timely_core/engine/vllm/grammar_processor.py), which a vLLM config may ask
for."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.timely_ros.ros_support import PYTHON, REPO, ros_env

pytestmark = pytest.mark.ros

CONFIG = REPO / "ros2_ws" / "src" / "timely_ros" / "config" / "sim_fleet_vllm.yaml"


def test_demo_completes_on_engine_vllm(tmp_path: Path) -> None:
    env = ros_env(tmp_path / "ros_log")  # vLLM's cache: the run's (tests/conftest.py)
    done = subprocess.run(
        [
            PYTHON,
            "-m",
            "timely_ros.cli",
            "demo",
            "--config",
            str(CONFIG),
            "--duration",
            "10",  # four tasks, drones and the arm (seed 7)
            "--seed",
            "7",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    found = re.search(r"replaying (\d+) tasks", out)
    assert found is not None, out
    n = int(found.group(1))
    assert n >= 3
    assert f"{n}/{n} tasks succeeded" in out
    assert len(re.findall(r"on (?:drone|arm)\d+: ok", out)) == n


def test_engine_vllm_with_grammars_is_accepted_at_configuration(tmp_path: Path) -> None:
    from timely_ros.config import load_bringup

    planner = load_bringup(CONFIG).planner
    assert planner is not None and planner.engine == "vllm" and planner.grammar
    gpu = load_bringup(CONFIG.with_name("sim_fleet_vllm_gpu.yaml")).planner
    assert gpu is not None and gpu.vllm_attention_backend == "FLASHINFER" and gpu.grammar
    # FlashInfer serves heads 64+ wide: the GPU image widens the planner's into the
    # folder the GPU config plans with
    build = (REPO / "docker" / "Dockerfile.gpu").read_text().replace("\\\n", " ")
    widen = f"robot_models/checkpoints/planner {gpu.model_path} --head-dim 64"
    assert f"-m robot_models.checkpoints.widen_heads {widen}" in " ".join(build.split())
    servers = tmp_path / "servers.yaml"
    urls = "    vllm_server_urls: [http://127.0.0.1:8100]\n"
    text = CONFIG.read_text().replace("engine: vllm ", "engine: vllm-server ")
    servers.write_text(text.replace("    vllm_dtype:", urls + "    vllm_dtype:"))
    planned = load_bringup(servers).planner
    assert planned is not None and planned.engine == "vllm-server" and planned.grammar


def test_engine_vllm_server_needs_urls(tmp_path: Path) -> None:
    from timely_ros.config import ConfigError, load_bringup

    bad = tmp_path / "servers.yaml"
    bad.write_text(CONFIG.read_text().replace("engine: vllm ", "engine: vllm-server "))
    with pytest.raises(ConfigError, match="needs vllm_server_urls"):
        load_bringup(bad)


def test_engine_vllm_swaps_only_through_kv_offloading(tmp_path: Path) -> None:
    from timely_ros.config import ConfigError, load_bringup
    from timely_ros.service_factory import build_vllm_engine

    swap = "    grammar: true\n    handling_strategy: swap\n"
    bad = tmp_path / "swap.yaml"
    text = CONFIG.read_text().replace("    grammar: true\n", swap)
    bad.write_text(text)
    with pytest.raises(ConfigError, match=r"swaps a waiting plan's KV .* set vllm_kv_offload_gib"):
        load_bringup(bad)
    servers = tmp_path / "servers.yaml"
    servers.write_text(
        text.replace("engine: vllm ", "engine: vllm-server ").replace(
            swap, swap + "    vllm_server_urls: [http://127.0.0.1:8100]\n"
        )
    )
    with pytest.raises(ConfigError, match="engine 'vllm-server' swaps a waiting plan's KV"):
        load_bringup(servers)
    offload = tmp_path / "offload.yaml"
    offload.write_text(text.replace(swap, swap + "    vllm_kv_offload_gib: 2\n"))
    params = load_bringup(offload).planner
    assert params is not None and params.vllm_kv_offload_gib == 2
    # accepted as configuration; vLLM's CPU build has no host tier, said before it builds
    with pytest.raises(ConfigError, match="offloads KV to host memory only from CUDA and XPU"):
        build_vllm_engine(params, REPO / "robot_models" / "checkpoints" / "planner")
