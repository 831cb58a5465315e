"""The engine's view of one generation (nano-vllm's `Sequence`): its token ids,
where its KV lives, and how far the KV has been computed. Shared by the torch
engine and the simulator, which keep the same paged-KV books."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from timely_core.engine.observed import Span
from timely_core.engine.protocol import HandlingStrategy, SamplingParams

if TYPE_CHECKING:
    import torch

    from timely_core.engine.copy_bias import CopyScan
    from timely_core.engine.torch.grammar import GrammarMatcher


class KvLocation(str, Enum):
    """Where a generation's KV blocks are."""

    DEVICE = "device"  # `block_table` holds device blocks for every computed token
    HOST = "host"  # exclusive blocks copied to the host pool (`host_blocks`)
    NONE = "none"  # discarded: the next run re-prefills prompt + generated ids


@dataclass(eq=False)  # identity: two generations are never "equal"
class Sequence:
    """Token ids, block table and progress of one live generation.

    Invariant while on DEVICE: `block_table` covers `len(token_ids)` tokens minus at
    most the one just sampled, and the KV of the first `num_computed` tokens is in it.
    """

    gen_id: int
    token_ids: list[int]
    prompt_len: int
    params: SamplingParams
    admitted_seq: int  # admission order: among unranked victims the most recent goes first
    prefix_id: str | None = None
    variant: str | None = None  # the LoRA adapter it runs with (None: the base model)
    generator: torch.Generator | None = None  # seeded sampling (torch engine)
    # where the generated tokens stand in `params.grammar` (torch engine); moved only
    # by kept tokens, so it outlives suspension, swap, discard and preemption
    grammar: GrammarMatcher | None = None
    closing: bool = False  # asked to close its grammar now (`ClosingEngine`)
    closing_from: int = 0  # num_generated when it was asked (its closing window's start)
    closing_within: int | None = None  # tokens it had left then before the caller's limit
    copy_scan: CopyScan | None = None  # quotes counted so far for the copy bias (torch engine)
    # observations appended by `rewrite`, as spans of the generated ids (observed.py)
    observed: list[Span] = field(default_factory=list)
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)  # chained hash per full block
    host_blocks: dict[int, int] = field(default_factory=dict)  # table index -> host block
    # prefetched (suspended, back on DEVICE before its resume): the host blocks that
    # still hold the same KV, so giving the device blocks up again copies nothing
    host_copy: dict[int, int] = field(default_factory=dict)
    prefetched: bool = False
    num_computed: int = 0
    kv: KvLocation = KvLocation.DEVICE
    suspended: bool = False
    strategy: HandlingStrategy | None = None  # how it was last suspended or preempted
    # computed tokens whose KV a discard dropped: what a re-admission may recompute
    discarded_computed: int = 0

    @property
    def num_generated(self) -> int:
        return len(self.token_ids) - self.prompt_len

    @property
    def num_pending(self) -> int:
        """Tokens whose KV still has to be computed before the next sample."""
        return len(self.token_ids) - self.num_computed

    @property
    def is_decoding(self) -> bool:
        return self.num_pending == 1 and self.num_generated > 0
