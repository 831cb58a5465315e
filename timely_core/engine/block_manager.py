"""Block bookkeeping for the paged KV cache, shared by the torch engine and the
simulator (tensors only through a `BlockCopier`: the torch engine's KV cache, or the
simulator's transfer meter).

Device blocks are reference-counted: a block is shared by every generation whose
prompt starts with the same content (found by a chained content hash) and by the
pinned prefix that produced it. A freed block keeps its content and hash until it
is reallocated, so a later prompt with the same prefix still hits it (LRU).
Writing into a shared block copies it first (copy-on-write), which is how a
pinned prefix's partial last block is reused. Host blocks hold swapped-out KV.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from timely_core.engine.protocol import OutOfKvMemory
from timely_core.engine.sequence import KvLocation, Sequence

# Tokens per KV block unless an engine is configured otherwise (vLLM's default too).
DEFAULT_BLOCK_SIZE = 16
_ROOT_HASH = -1


class BlockCopier(Protocol):
    """Moves the contents of KV blocks: within the device pool, and between it and
    the host pool."""

    def copy_device(self, src: list[int], dst: list[int]) -> None: ...

    def swap_out(self, device_blocks: list[int], host_blocks: list[int]) -> None: ...

    def swap_in(self, host_blocks: list[int], device_blocks: list[int]) -> None: ...


@dataclass
class AdmissionPlan:
    """How `admit` would place a sequence: blocks it shares (cached or the prefix's),
    tokens whose KV they already hold, new blocks it allocates (a copy-on-write
    block included) and free blocks it takes in all (new ones, and cached ones
    nobody holds)."""

    shared: list[int]
    computed: int
    copy_on_write: bool
    fresh: int
    cost: int


def root_hash(variant: str | None) -> int:
    """The chain's start: a LoRA variant computes other KV for the same tokens, so
    each variant's blocks form their own chains (as vLLM's hash includes the LoRA);
    `BlockManager.kv_key` names a variant whose KV is another's by that one."""
    return _ROOT_HASH if variant is None else hash(("variant", variant))


def chain_hash(parent: int, tokens: tuple[int, ...]) -> int:
    """Hash of a full block given the hash of the block before it."""
    return hash((parent, tokens))


def blocks_for(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


@dataclass
class PinnedPrefix:
    """A registered prompt prefix whose KV stays on device until unregistered."""

    prefix_id: str
    token_ids: list[int]
    blocks: list[int]
    variant: str | None = None  # whose KV it holds


class BlockManager:
    def __init__(
        self,
        block_size: int,
        num_device_blocks: int,
        num_host_blocks: int,
        cache: BlockCopier,
        caching: bool = True,
    ) -> None:
        self.block_size = block_size
        self.caching = caching
        self.num_device_blocks = num_device_blocks
        self.num_host_blocks = num_host_blocks
        self.cache = cache
        self.ref_counts = [0] * num_device_blocks
        self._free_uncached: list[int] = list(range(num_device_blocks - 1, -1, -1))
        self._free_cached: OrderedDict[int, None] = OrderedDict()  # LRU first
        self._hash_of_block: dict[int, int] = {}
        self._block_of_hash: dict[int, int] = {}
        self._content: dict[int, tuple[int, tuple[int, ...]]] = {}  # block -> (parent, tokens)
        self._free_host: list[int] = list(range(num_host_blocks - 1, -1, -1))
        self.prefixes: dict[str, PinnedPrefix] = {}
        # variant -> the variant whose KV it writes (None: the base's), for variants
        # whose KV equals another's; their blocks hash from that one's root and share
        self.kv_keys: dict[str, str | None] = {}
        self.swapped_out_blocks = 0  # totals, for stats and the simulator's costs
        self.swapped_in_blocks = 0
        self.prefetches = 0  # swap-ins ahead of a resume (`prefetch`)
        self.prefetch_hits = 0  # ... that the resume found on the device
        self.prefetch_given_up = 0  # ... whose device blocks were freed again first

    # ---- pool primitives -------------------------------------------------
    @property
    def num_free_device(self) -> int:
        return len(self._free_uncached) + len(self._free_cached)

    @property
    def num_free_host(self) -> int:
        return len(self._free_host)

    @property
    def num_pinned_blocks(self) -> int:
        return len({b for prefix in self.prefixes.values() for b in prefix.blocks})

    def _allocate(self, count: int) -> list[int]:
        if count > self.num_free_device:
            raise OutOfKvMemory(
                f"need {count} free KV blocks on device, only {self.num_free_device} free"
            )
        blocks = []
        for _ in range(count):
            if self._free_uncached:
                block = self._free_uncached.pop()
            else:
                block, _ = self._free_cached.popitem(last=False)
                self._forget_hash(block)
            self.ref_counts[block] = 1
            blocks.append(block)
        return blocks

    def _forget_hash(self, block: int) -> None:
        digest = self._hash_of_block.pop(block, None)
        if digest is not None and self._block_of_hash.get(digest) == block:
            del self._block_of_hash[digest]
        self._content.pop(block, None)

    def _share(self, block: int) -> None:
        if self.ref_counts[block] == 0:
            del self._free_cached[block]
        self.ref_counts[block] += 1

    def _release(self, block: int) -> None:
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            if block in self._hash_of_block:
                self._free_cached[block] = None
            else:
                self._free_uncached.append(block)

    # ---- prefix cache ----------------------------------------------------
    def kv_key(self, variant: str | None) -> str | None:
        """Whose KV `variant` writes: its own, or a variant's it equals (`kv_keys`)."""
        return variant if variant is None else self.kv_keys.get(variant, variant)

    def lookup(
        self, token_ids: list[int], max_blocks: int, first: int = 0, variant: str | None = None
    ) -> list[int]:
        """Cached device blocks holding `variant`'s KV of the full blocks of `token_ids`
        from block `first` on, as far as they run unbroken (none when caching is off)."""
        size = self.block_size
        matched: list[int] = []
        if not self.caching:
            return matched
        parent = root_hash(self.kv_key(variant))
        for i in range(first):  # the chain's digest up to `first`, from content alone
            parent = chain_hash(parent, tuple(token_ids[i * size : (i + 1) * size]))
        for i in range(first, min(max_blocks, len(token_ids) // size)):
            tokens = tuple(token_ids[i * size : (i + 1) * size])
            digest = chain_hash(parent, tokens)
            block = self._block_of_hash.get(digest)
            if block is None or self._content[block] != (parent, tokens):
                break
            matched.append(block)
            parent = digest
        return matched

    def register_full_blocks(self, state: Sequence) -> None:
        """Publish the hash of every block of `state` that became full and computed."""
        size = self.block_size
        for i in range(len(state.block_hashes), state.num_computed // size):
            parent = (
                state.block_hashes[-1]
                if state.block_hashes
                else root_hash(self.kv_key(state.variant))
            )
            tokens = tuple(state.token_ids[i * size : (i + 1) * size])
            digest = chain_hash(parent, tokens)
            state.block_hashes.append(digest)
            block = state.block_table[i]
            if block not in self._hash_of_block and digest not in self._block_of_hash:
                self._hash_of_block[block] = digest
                self._block_of_hash[digest] = block
                self._content[block] = (parent, tokens)

    # ---- generations -----------------------------------------------------
    def admission_cost(self, num_tokens: int, prefix: PinnedPrefix | None) -> int:
        """Free device blocks an admission of `num_tokens` tokens sharing `prefix`
        needs at most (exactly when nothing past the prefix is cached: `plan`)."""
        size = self.block_size
        full = len(prefix.token_ids) // size if prefix is not None else 0
        # a prompt ending inside the prefix's full blocks copies its last one to write
        copy = 1 if prefix is not None and num_tokens <= full * size else 0
        return blocks_for(num_tokens, size) - full + copy

    def plan(
        self,
        token_ids: list[int],
        prefix: PinnedPrefix | None,
        compute_all: bool = False,
        past_prefix: bool = False,
        variant: str | None = None,
    ) -> AdmissionPlan:
        """Where `admit` finds KV for `token_ids`: the pinned prefix's blocks, and,
        with `past_prefix` (a re-admission) or without a prefix, the longest run of
        cached full blocks after them. All but the last token may come from the
        cache (its logits are needed) unless `compute_all` (registering a prefix)."""
        size = self.block_size
        limit = len(token_ids) if compute_all else len(token_ids) - 1
        if prefix is None:
            shared = self.lookup(token_ids, limit // size, variant=variant)
            computed = len(shared) * size
        else:
            full = len(prefix.token_ids) // size
            beyond = self.lookup(token_ids, limit // size, full, variant) if past_prefix else []
            shared = prefix.blocks[:full] + beyond
            computed = len(shared) * size
            if computed < len(prefix.token_ids):  # its partial last block too
                shared, computed = list(prefix.blocks), len(prefix.token_ids)
        computed = min(computed, limit)
        write_block = computed // size
        copy_on_write = write_block < len(shared)
        if copy_on_write:
            shared = shared[: write_block + 1]
        fresh = blocks_for(len(token_ids), size) - len(shared) + (1 if copy_on_write else 0)
        revived = sum(1 for block in shared if self.ref_counts[block] == 0)
        return AdmissionPlan(shared, computed, copy_on_write, fresh, fresh + revived)

    def admit(
        self,
        state: Sequence,
        prefix: PinnedPrefix | None,
        compute_all: bool = False,
        past_prefix: bool = False,
    ) -> None:
        """Give `state` device blocks for all its tokens, reusing cached KV (`plan`).
        Raises OutOfKvMemory, changing nothing."""
        plan = self.plan(state.token_ids, prefix, compute_all, past_prefix, state.variant)
        if plan.cost > self.num_free_device:
            raise OutOfKvMemory(
                f"generation {state.gen_id} needs {plan.cost} free KV blocks "
                f"({len(state.token_ids)} tokens), only {self.num_free_device} free"
            )
        for block in plan.shared:
            self._share(block)
        table = plan.shared + self._allocate(plan.fresh)
        if plan.copy_on_write:
            write_block = plan.computed // self.block_size
            private = table.pop()
            self.cache.copy_device([table[write_block]], [private])
            self._release(table[write_block])
            table[write_block] = private
        state.block_table, state.block_hashes = table, []
        state.num_computed, state.kv = plan.computed, KvLocation.DEVICE
        self.register_full_blocks(state)

    def blocks_to_grow(self, state: Sequence, num_tokens: int) -> int:
        return max(0, blocks_for(num_tokens, self.block_size) - len(state.block_table))

    def grow(self, state: Sequence, num_tokens: int) -> None:
        """Extend the table to hold `num_tokens` tokens (a decode crossing a block)."""
        state.block_table.extend(self._allocate(self.blocks_to_grow(state, num_tokens)))

    def free(self, state: Sequence) -> None:
        """Drop all of `state`'s KV (finish, abort, discard). Last block first, as
        vLLM does: a table's tail is evicted from the prefix cache before its head
        (which other prompts are likelier to share), and the free stack hands the
        blocks out again in ascending order, back to back (decode reads them as
        views instead of gathering them)."""
        for index in range(len(state.block_table) - 1, -1, -1):
            if index not in state.host_blocks:
                self._release(state.block_table[index])
        self._free_host.extend(state.host_blocks.values())
        self._end_prefetch(state, hit=False)
        state.block_table, state.block_hashes, state.host_blocks = [], [], {}
        state.num_computed, state.kv = 0, KvLocation.NONE

    def swap_out(self, state: Sequence) -> bool:
        """Copy `state`'s exclusive blocks to the host pool and free them on device;
        shared blocks stay (others hold them anyway). False if the host pool is full.
        A prefetched generation only gives its prefetch up (its host copy is valid)."""
        if state.prefetched:
            self.give_up_prefetch(state)
            return True
        exclusive = [i for i, b in enumerate(state.block_table) if self.ref_counts[b] == 1]
        if len(exclusive) > self.num_free_host:
            return False
        host = [self._free_host.pop() for _ in exclusive]
        self.cache.swap_out([state.block_table[i] for i in exclusive], host)
        self.swapped_out_blocks += len(exclusive)
        for index, host_block in zip(exclusive, host, strict=True):
            self._release(state.block_table[index])
            state.host_blocks[index] = host_block
        state.kv = KvLocation.HOST
        return True

    def swap_in(self, state: Sequence, keep_host: bool = False) -> None:
        """Copy swapped blocks back to fresh device blocks. Raises OutOfKvMemory.
        `keep_host` (a prefetch): the host blocks keep their copy (`host_copy`)."""
        indices = sorted(state.host_blocks)
        device = self._allocate(len(indices))
        host = [state.host_blocks[i] for i in indices]
        self.cache.swap_in(host, device)
        self.swapped_in_blocks += len(host)
        for index, block in zip(indices, device, strict=True):
            state.block_table[index] = block
        if keep_host:
            state.host_copy = state.host_blocks
        else:
            self._free_host.extend(host)
        state.host_blocks = {}
        state.kv = KvLocation.DEVICE

    def prefetch(self, state: Sequence) -> bool:
        """Swap a suspended generation's KV in ahead of its resume, keeping the host
        copy. False, changing nothing, if the free device blocks are too few."""
        if len(state.host_blocks) > self.num_free_device:
            return False
        self.swap_in(state, keep_host=True)
        state.prefetched = True
        self.prefetches += 1
        return True

    def give_up_prefetch(self, state: Sequence) -> None:
        """Free a prefetched generation's swapped-in device blocks: its KV is on the
        host again (the copy it kept), at no transfer cost."""
        for index in state.host_copy:
            self._release(state.block_table[index])
        state.host_blocks, state.host_copy = state.host_copy, {}
        state.prefetched = False
        state.kv = KvLocation.HOST
        self.prefetch_given_up += 1

    def settle_prefetch(self, state: Sequence) -> None:
        """A prefetched generation resumes: its device KV is the one that counts now
        (it will grow), so the host copy goes."""
        self._end_prefetch(state, hit=True)

    def _end_prefetch(self, state: Sequence, hit: bool) -> None:
        if not state.prefetched:
            return
        self._free_host.extend(state.host_copy.values())
        state.host_copy, state.prefetched = {}, False
        if hit:
            self.prefetch_hits += 1
        else:
            self.prefetch_given_up += 1

    # ---- pinned prefixes -------------------------------------------------
    def pin(self, prefix_id: str, state: Sequence) -> PinnedPrefix:
        """Keep the fully computed `state`'s blocks as prefix `prefix_id`."""
        prefix = PinnedPrefix(
            prefix_id, list(state.token_ids), list(state.block_table), state.variant
        )
        self.prefixes[prefix_id] = prefix
        state.block_table = []
        return prefix

    def unpin(self, prefix_id: str) -> None:
        for block in self.prefixes.pop(prefix_id).blocks:
            self._release(block)
