"""Robots that plan with fleet variants, on the real torch engine and the shipped
planner: a robot configured with a LoRA variant gets that variant's greedy plan (the
engine driven straight through with the variant), a robot on the base gets the
base's, in the same run and the same batches, their published scenes prefilled per
variant; a variant the engine cannot serve is refused by name; the weights report
counts the base once and each adapter by its own bytes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.language import load_language
from timely_core.clock import MonotonicClock, VirtualClock
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.variants import ResidentVariant
from timely_core.errors import VariantUnavailable
from timely_core.language.grammar import language_grammar, with_copy_bias
from timely_core.language.plan_language import PlanLanguage
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.serving.robots import encode_prefix, encode_request

PLANNER = Path(os.environ.get("TIMELY_PLANNER_PATH", default_planner_path()))
VARIANTS = PLANNER.parent / "variants"
HEAVY = "heavy-drone"
MAX_TOKENS = 120
TIMEOUT_S = 120.0
SCENE = "visible: door, lamp"
INSTRUCTIONS = ("Fly forward 200 cm", "Fly up 100 cm, then turn right 90 degrees")


def _engine(*variants: str) -> TorchEngine:
    engine = TorchEngine(PLANNER, EngineConfig())
    for name in variants:
        engine.load_adapter(name, VARIANTS / name)
    return engine


def _direct_plan(
    engine: TorchEngine,
    tokenizer: Tokenizer,
    language: PlanLanguage,
    text: str,
    variant: str | None,
) -> str:
    """The plan of the engine driven straight through (no service, no segments), greedy
    under the language's grammar and copy bias as the service decodes."""
    prompt = encode_prefix(tokenizer, language.prompt_prefix()) + encode_request(
        tokenizer, language.format_request(SCENE, text)
    )
    params = with_copy_bias(
        SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, grammar=language_grammar(language)),
        language,
        SCENE,
        text,
        ServiceConfig().copy_bias,
    )
    engine.add(0, prompt, params, variant=variant)
    ids: list[int] = []
    finished = False
    while not finished:
        for out in engine.step([0]):
            finished = out.finished
            if not (finished and out.token_id == engine.eos_token_id):
                ids.append(out.token_id)
    return str(tokenizer.decode(ids))


def test_each_robot_plans_with_its_own_variant_in_the_same_run() -> None:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    drone = load_language("drone")
    direct = _engine(HEAVY)
    expected = {
        (variant, text): _direct_plan(direct, tokenizer, drone, text, variant)
        for variant in (None, HEAVY)
        for text in INSTRUCTIONS
    }
    for text in INSTRUCTIONS:  # the adapter matters for these instructions
        assert expected[(None, text)] != expected[(HEAVY, text)], text

    service = PlanningService(
        _engine(HEAVY),
        tokenizer,
        clock=MonotonicClock(),
        config=ServiceConfig(max_tokens=MAX_TOKENS, scene_debounce_s=0.0),
        languages={"drone": drone},
    )
    service.register_robot("heavy1", robot_type="drone", variant=HEAVY)
    service.register_robot("base1", robot_type="drone")
    assert service.robot_variants() == {"heavy1": HEAVY, "base1": None}
    for robot_id in ("heavy1", "base1"):  # one scene, a prefill per variant
        service.publish_scene(robot_id, SCENE)
    service.start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while service.stats().scene_prefixes < 2:
            assert time.monotonic() < deadline, "the scenes were not prefilled in time"
            time.sleep(0.01)
        handles = {  # both robots' tasks submitted together: they share batches
            (variant, text): service.submit(TaskRequest(robot_id=robot_id, instruction=text))
            for text in INSTRUCTIONS
            for robot_id, variant in (("heavy1", HEAVY), ("base1", None))
        }
        got = {}
        for key, handle in handles.items():
            for segment in handle.segments(timeout_s=TIMEOUT_S):
                handle.segment_done(segment.index)
            result = handle.result(timeout_s=TIMEOUT_S)
            assert result.success, result.error
            got[key] = result.plan_text
    finally:
        service.stop()
    assert got == expected
    stats = service.stats()
    assert stats.scene_prefills == 2 and stats.scene_hits == len(handles)


def test_the_weights_report_counts_the_base_once_and_each_adapter_by_its_bytes() -> None:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    engine = _engine()
    service = PlanningService(engine, tokenizer, languages={"drone": load_language("drone")})
    base = service.resident_weights()
    assert base is not None and base.variants == ()
    assert base.base_bytes == engine.model.weights_nbytes == base.total_bytes
    totals = [base.total_bytes]
    weights = base
    for name in (HEAVY, "warehouse-drone"):
        engine.load_adapter(name, VARIANTS / name)
        folder = VARIANTS / name
        file_bytes = sum(
            t.nbytes for t in load_file(str(folder / "adapter_model.safetensors")).values()
        )
        reported = service.resident_weights()
        assert reported is not None
        weights = reported
        assert weights.base_bytes == base.base_bytes  # the base is held once
        # warehouse-drone adapts only what acts after the last layer's k/v: the base's KV
        base_kv = name == "warehouse-drone"
        expected = ResidentVariant(name, "lora", file_bytes, str(folder), base_kv=base_kv)
        assert weights.variants[-1] == expected
        assert weights.total_bytes - totals[-1] == file_bytes  # exactly its own bytes
        totals.append(weights.total_bytes)
    assert weights.names() == [HEAVY, "warehouse-drone"]


def test_a_variant_the_engine_cannot_serve_is_refused_by_name() -> None:
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    drone = load_language("drone")
    service = PlanningService(_engine(HEAVY), tokenizer, languages={"drone": drone})
    with pytest.raises(
        VariantUnavailable,
        match=r"robot 'd1': variant 'packing-arm' is not loaded in the engine "
        r"\(loaded: heavy-drone\)",
    ):
        service.register_robot("d1", robot_type="drone", variant="packing-arm")
    with pytest.raises(VariantUnavailable, match="variant must be a non-empty name"):
        service.register_robot("d1", robot_type="drone", variant="")
    assert service.robots() == {}
    eos = tokenizer.token_to_id("<eos>")
    assert eos is not None
    simulated = SimulatedEngine(
        VirtualClock(),
        LatencyModel(),
        lambda prompt: [eos],
        SimulatedEngineConfig(eos_token_id=eos),
    )
    on_sim = PlanningService(simulated, tokenizer, clock=VirtualClock(), languages={"drone": drone})
    with pytest.raises(
        VariantUnavailable,
        match=r"robot 'd1': variant 'heavy-drone' cannot be served: the SimulatedEngine "
        r"engine serves the base model only",
    ):
        on_sim.register_robot("d1", robot_type="drone", variant=HEAVY)
    assert on_sim.resident_weights() is None
    on_sim.register_robot("d1", robot_type="drone")  # the base is served as before
    assert on_sim.robot_variants() == {"d1": None}


def test_a_robot_re_registered_on_another_variant_plans_with_it() -> None:
    """The stored prefix is per variant: re-registering a robot on the base unpins its
    variant's prefix, and its next plan is the base's."""
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    drone = load_language("drone")
    text = INSTRUCTIONS[0]
    direct = _engine(HEAVY)
    expected = {v: _direct_plan(direct, tokenizer, drone, text, v) for v in (HEAVY, None)}
    engine = _engine(HEAVY)
    service = PlanningService(
        engine,
        tokenizer,
        clock=VirtualClock(),
        config=ServiceConfig(max_tokens=MAX_TOKENS),
        languages={"drone": drone},
    )
    got = []
    for variant in (HEAVY, None, HEAVY):
        service.register_robot("d1", robot_type="drone", variant=variant)
        pinned = set(engine.blocks.prefixes)
        assert len(pinned) == 1 and (f"drone@{HEAVY}:" in next(iter(pinned))) == bool(variant)
        handle = service.submit(TaskRequest(robot_id="d1", instruction=text, scene=SCENE))
        service.run_until_idle()
        result = handle.result(timeout_s=0)
        assert result.success, result.error
        got.append(result.plan_text)
    assert got == [expected[HEAVY], expected[None], expected[HEAVY]]
