"""The torch engine, noting the grammar each generation was admitted with."""

from __future__ import annotations

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.engine import TorchEngine


class GrammarRecordingEngine(TorchEngine):
    """`admitted`: each generation's `SamplingParams.grammar`, by gen_id;
    `admitted_params`: its whole `SamplingParams`."""

    admitted: dict[int, str | None]
    admitted_params: dict[int, SamplingParams]

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
        if hasattr(self, "admitted_params"):
            self.admitted_params[gen_id] = params
