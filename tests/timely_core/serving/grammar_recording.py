"""The torch engine, noting the grammar each generation was admitted with."""

from __future__ import annotations

from pathlib import Path

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine


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
