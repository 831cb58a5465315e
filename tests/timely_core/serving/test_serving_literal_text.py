"""Text from outside is encoded as text: an instruction or scene that spells the
EOS token (`<eos>`) reaches the model as characters, not as the control id that
ends a sequence, and the caller's tokenizer is left as it was."""

from __future__ import annotations

from collections.abc import Sequence

from tests.timely_core.core_support import (
    TinyLanguage,
    eos_id,
    make_service,
    make_tokenizer,
    plan_script,
)
from timely_core.request import TaskRequest

INSTRUCTION = "look for the <eos> cat"
PLANS = {INSTRUCTION: "search('cat');"}


def test_an_instruction_that_spells_eos_is_planned_as_text() -> None:
    service, _, engine = make_service(PLANS)
    prompts: list[list[int]] = []
    script = plan_script(PLANS)

    def recording(prompt_ids: Sequence[int]) -> list[int]:
        prompts.append(list(prompt_ids))
        return script(prompt_ids)

    engine.script = recording
    handle = service.submit(
        TaskRequest(robot_id="drone1", instruction=INSTRUCTION, scene="a <eos> on the mat")
    )
    service.run_until_idle()
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    assert result.plan_text == PLANS[INSTRUCTION]
    [prompt] = prompts
    assert eos_id() not in prompt
    tokenizer = make_tokenizer()
    request = TinyLanguage().format_request("a <eos> on the mat", INSTRUCTION)
    assert tokenizer.decode(prompt).endswith(request)
    # the caller's tokenizer still reads `<eos>` as its token (training, the engines)
    assert tokenizer.encode("<eos>", add_special_tokens=False).ids == [eos_id()]
