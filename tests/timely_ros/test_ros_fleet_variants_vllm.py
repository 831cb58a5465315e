"""Fleet variants on `engine: vllm` (no DDS here): the planner config's adapters are
loaded into vLLM's multi-LoRA with slots sized from the adapters, each robot is
registered with its variant, and a config naming one adapter too many for vLLM's
slots cannot happen (max_loras follows the adapters)."""

from __future__ import annotations

from pathlib import Path

from timely_ros.config import parse_bringup
from timely_ros.service_factory import build_service

from timely_core.engine.vllm.engine import VllmEngine

HEAVY = "robot_models/checkpoints/variants/heavy-drone"  # relative: from the repo root
WAREHOUSE = "robot_models/checkpoints/variants/warehouse-drone"


def test_engine_vllm_serves_the_configured_variants(tmp_path: Path) -> None:
    body: dict[str, object] = {
        "engine": "vllm",
        "grammar": False,
        "robots": ["drone1", "drone2", "drone3"],
        "drone1": {"type": "drone", "variant": "heavy-drone"},
        "drone2": {"type": "drone", "variant": "warehouse-drone"},
        "drone3": {"type": "drone"},
        "adapters": {"heavy-drone": HEAVY, "warehouse-drone": WAREHOUSE},
    }
    params = parse_bringup({"timely_planner": {"ros__parameters": body}}).planner
    assert params is not None
    service = build_service(params)
    engine = service.engine
    assert isinstance(engine, VllmEngine)
    try:
        assert engine.config.max_loras == 2 and engine.config.max_lora_rank == 8
        weights = service.resident_weights()
        assert weights is not None
        assert weights.names() == ["heavy-drone", "warehouse-drone"]
        assert weights.total_bytes == weights.base_bytes + weights.variant_bytes
        assert service.robot_variants() == {
            "drone1": "heavy-drone",
            "drone2": "warehouse-drone",
            "drone3": None,
        }
    finally:
        engine.close()  # vLLM's process-wide state goes with it (VllmEngine.close)
