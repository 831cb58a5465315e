"""The torch engine, noting the grammar each generation was admitted with, and the
shipped planner served on it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from timely_core.clock import MonotonicClock
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.language.plan_language import PlanLanguage
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig


class GrammarRecordingEngine(TorchEngine):
    """`admitted`: each generation's `SamplingParams.grammar`, by gen_id;
    `admitted_params`: its whole `SamplingParams`."""

    def __init__(self, model_path: str | Path, config: EngineConfig | None = None) -> None:
        super().__init__(model_path, config)
        self.admitted: dict[int, str | None] = {}
        self.admitted_params: dict[int, SamplingParams] = {}

    def add(
        self,
        gen_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prefix_id: str | None = None,
        variant: str | None = None,
    ) -> None:
        super().add(gen_id, prompt_token_ids, params, prefix_id, variant)
        self.admitted[gen_id] = params.grammar
        self.admitted_params[gen_id] = params


def recording_service(
    languages: Mapping[str, PlanLanguage], config: ServiceConfig | None = None
) -> tuple[PlanningService, GrammarRecordingEngine]:
    """A `timely` service (not started) on the shipped planner, its engine recording."""
    path = default_planner_path()
    if not (path / "model.safetensors").is_file():
        pytest.fail(f"the planner checkpoint is missing at {path}: python -m robot_models.train")
    engine = GrammarRecordingEngine(Path(path), EngineConfig())
    service = PlanningService(
        engine,
        Tokenizer.from_file(str(path / "tokenizer.json")),
        policy="timely",
        clock=MonotonicClock(),
        config=config or ServiceConfig(),
        languages=dict(languages),
    )
    return service, engine
