"""Copy bias: inside a quoted name, the tokens that go on spelling one of the
request's own names get `SamplingParams.copy_bias` added to their logits.

A small planner recalls the names it was trained on ("the thermos" becomes `'cup'`)
far more readily than it copies an unseen one from the request. Grounded names
(a grammar that allows only the request's names) fix that, but they also forbid a
name the request only implies ("a tool for cutting paper" is `'scissors'`). The bias
is the soft form: where the model is unsure, a name the request gives wins; where it
is sure enough of another (by more than the bias, in logits), that one stays.

A generation is inside a name while its generated text holds an odd number of
quotes and, when the language gives openers (`copy_openers`: a skill's `(`, a later
argument's `,`), the last quote came right after one, so a free-text message is not
a name; the name so far is the text after that quote. A token is boosted when
its bytes continue a listed name that starts with the name so far, up to and
including the closing quote (`'cup` + `');` counts: the name ends inside it).
Segments end at complete statements, so counting from the generation's first
generated token is enough.

Some names must differ from the one before them: a held object is not placed on
itself (`pk('cup');pl('cup')`), nothing is stacked on itself. The language says
where, in pairs (`copy_distinct_after[i]`, `copy_distinct_openers[i]`): a name
opened right after `copy_distinct_openers[i]` gets no bias toward the name quoted
right after `copy_distinct_after[i]` when only unquoted text lies between that
name and the opener (`pk('cup');pl(`, `st('cup',`). The model may still write it;
it is only not pushed to.

Values (`copy_values`, numbers a request states) are unquoted: a generation is
inside one while the text after one of its openers (`copy_value_openers`) is all
sign, digits and point. The planner's tokenizer writes a digit with its place
(`100` is a hundreds 1, a tens 0, a units 0), so a value's next token is the
next of the ids the engine's tokenizer writes it with (`encode`), not any id that
spells the next character; the ids already taken must be that value's too."""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from timely_core.engine.torch.grammar_vocab import TokenBytes

if TYPE_CHECKING:  # torch only where logits are: the service (and tool processes) import this
    import torch

_LONGEST_START = 4  # a token that closes a name carries at most this much after it
MAX_CONTINUATIONS = 4096  # names spelled so far whose continuing ids are kept
MAX_OPENER_CHARS = 32
MAX_VALUE_CHARS = 16
MAX_VALUE_ENCODINGS = 4096  # values whose ids are kept
# how far back from a name's opening quote the name it must differ from is looked for
MAX_DISTINCT_CHARS = 256
_VALUE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
_VALUE_SO_FAR = re.compile(rb"[-+0-9.]*\Z")


class CopySettings(Protocol):
    """What a generation copies: `SamplingParams` in the torch engine, `GrammarArgs`
    inside vLLM."""

    @property
    def copy_names(self) -> tuple[str, ...]: ...

    @property
    def copy_bias(self) -> float: ...

    @property
    def copy_quote(self) -> str: ...

    @property
    def copy_openers(self) -> tuple[str, ...]: ...

    @property
    def copy_values(self) -> tuple[str, ...]: ...

    @property
    def copy_value_openers(self) -> tuple[str, ...]: ...

    @property
    def copy_distinct_after(self) -> tuple[str, ...]: ...

    @property
    def copy_distinct_openers(self) -> tuple[str, ...]: ...


def usable_name(name: object, quote: str) -> bool:
    """Whether `name` can be copied between `quote`s: a non-empty text without it."""
    return isinstance(name, str) and bool(name) and quote not in name


def usable_opener(opener: object) -> bool:
    """Whether `opener` is a text of 1 to MAX_OPENER_CHARS characters."""
    return isinstance(opener, str) and 0 < len(opener) <= MAX_OPENER_CHARS


def usable_value(value: object) -> bool:
    """Whether `value` is a number as plans write one: an optional sign, digits and
    at most one point, at most MAX_VALUE_CHARS characters."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_VALUE_CHARS
        and _VALUE.fullmatch(value) is not None
    )


def check_copy_params(params: CopySettings) -> None:
    """Raise ValueError naming the copy field that cannot mean anything."""
    if not math.isfinite(params.copy_bias) or params.copy_bias < 0:
        raise ValueError(f"copy_bias must be a finite number >= 0, got {params.copy_bias}")
    if not isinstance(params.copy_quote, str) or len(params.copy_quote) != 1:
        raise ValueError(f"copy_quote must be one character, got {params.copy_quote!r}")
    for name in params.copy_names:
        if not usable_name(name, params.copy_quote):
            raise ValueError(
                f"copy_names must be non-empty strings without the quote "
                f"{params.copy_quote!r}, got {name!r}"
            )
    for opener in (
        *params.copy_openers,
        *params.copy_value_openers,
        *params.copy_distinct_after,
        *params.copy_distinct_openers,
    ):
        if not usable_opener(opener):
            raise ValueError(
                f"copy_openers, copy_value_openers, copy_distinct_after and "
                f"copy_distinct_openers must be strings of 1 to {MAX_OPENER_CHARS} "
                f"characters, got {opener!r}"
            )
    if len(params.copy_distinct_after) != len(params.copy_distinct_openers):
        raise ValueError(
            f"copy_distinct_after and copy_distinct_openers are pairs: got "
            f"{len(params.copy_distinct_after)} and {len(params.copy_distinct_openers)}"
        )
    if len(params.copy_values) != len(params.copy_value_openers):
        raise ValueError(
            f"copy_values and copy_value_openers are pairs: got {len(params.copy_values)} "
            f"values and {len(params.copy_value_openers)} openers"
        )
    for value in params.copy_values:
        if not usable_value(value):
            raise ValueError(
                f"copy_values must be numbers of at most {MAX_VALUE_CHARS} characters "
                f"(sign, digits, point), got {value!r}"
            )


def copies(params: CopySettings) -> bool:
    """Whether a generation with `params` gets a copy bias at all."""
    return params.copy_bias > 0 and bool(params.copy_names or params.copy_values)


@dataclass
class CopyScan:
    """How far `CopyBias.boosted_scan` has counted quotes in one generation's ids
    (`source`, the list itself: a rewrite makes a new one)."""

    source: list[int]
    scanned: int
    parity: int  # 1: an odd number of quotes so far
    last_quote: int  # index in `source` of the last id spelling a quote; -1: none
    # the names the name opened at `held_at` must differ from (worked out once a name)
    held_at: int = -1
    held: frozenset[bytes] = frozenset()


class CopyBias:
    """One vocabulary's lookups: which ids spell a given text, which spell a given
    short text and more, and how many of a quote each id spells."""

    def __init__(self, vocab: TokenBytes, encode: Callable[[str], list[int]] | None = None) -> None:
        """`encode`: the engine's tokenizer, for values (none: values get no bias)."""
        self.seconds = 0.0  # spent working out and adding boosts (bench/grammar.py)
        # what each id adds to the text (nothing for a special token)
        self._spelled = [
            b"" if token_id in vocab.special else spelled
            for token_id, spelled in enumerate(vocab.tokens)
        ]
        self._by_bytes: dict[bytes, list[int]] = {}
        self._by_start: dict[bytes, list[int]] = {}
        for token_id, spelled in enumerate(self._spelled):
            if not spelled:
                continue
            self._by_bytes.setdefault(spelled, []).append(token_id)
            for end in range(1, min(len(spelled), _LONGEST_START + 1)):
                self._by_start.setdefault(spelled[:end], []).append(token_id)
        self._quotes: dict[bytes, npt.NDArray[np.int64]] = {}
        # (names, quote, name so far) -> ids: a plan opens the same names again and
        # again (`lk('cup')`, then `pk('cup')`), and each opening starts from nothing
        self._continuations: OrderedDict[tuple[tuple[str, ...], bytes, bytes], list[int]] = (
            OrderedDict()
        )
        self._encode = encode
        self._value_ids: OrderedDict[str, tuple[int, ...]] = OrderedDict()

    def _quote_counts(self, quote: bytes) -> npt.NDArray[np.int64]:
        counts = self._quotes.get(quote)
        if counts is None:
            counts = np.array([s.count(quote) for s in self._spelled], dtype=np.int64)
            self._quotes[quote] = counts
        return counts

    def boosted(self, generated: Sequence[int], params: CopySettings) -> list[int]:
        """The ids that continue one of `params.copy_names` after `generated` (the
        generation's own token ids); none outside a quoted name."""
        counts = self._quote_counts(params.copy_quote.encode())
        if not generated:
            return []
        per_token = counts[np.asarray(generated)]
        if int(per_token.sum()) % 2 == 0:
            return []
        last_quote = int(np.flatnonzero(per_token)[-1])
        return self._continuing(generated, 0, last_quote, params)

    def boosted_scan(
        self,
        ids: list[int],
        start: int,
        params: CopySettings,
        scan: CopyScan | None,
        observed: Sequence[tuple[int, int]] = (),
    ) -> tuple[list[int], CopyScan]:
        """`boosted` for the ids after `start` in `ids`, counting quotes only in the
        ids `scan` (what this returned last time for the same generation) has not
        seen: a generation's list only grows, and a rewrite replaces it, which
        starts the count again. Quotes in `observed` spans (from `start`:
        observations, observed.py) are not the plan's and are not counted. With
        `params.copy_values`, the ids that go on writing one of them join the
        names' (`boosted_values`)."""
        names, scan = self._names_scan(ids, start, params, scan, observed)
        if not params.copy_values:
            return names, scan
        values = self.boosted_values(ids, start, params)
        if not names:
            return values, scan
        return sorted(set(names).union(values)), scan

    def _names_scan(
        self,
        ids: list[int],
        start: int,
        params: CopySettings,
        scan: CopyScan | None,
        observed: Sequence[tuple[int, int]],
    ) -> tuple[list[int], CopyScan]:
        counts = self._quote_counts(params.copy_quote.encode())
        if scan is None or scan.source is not ids or scan.scanned > len(ids):
            scan = CopyScan(ids, start, 0, -1)
        for index in range(scan.scanned, len(ids)):
            if any(a <= index - start < b for a, b in observed):
                continue
            found = int(counts[ids[index]])
            if found:
                scan.parity ^= found & 1
                scan.last_quote = index
        scan.scanned = len(ids)
        if not scan.parity or not params.copy_names:
            return [], scan
        return self._continuing(ids, start, scan.last_quote, params, scan), scan

    def boosted_values(self, ids: Sequence[int], start: int, params: CopySettings) -> list[int]:
        """The ids that go on writing one of `params.copy_values` after its opener,
        as the engine's tokenizer writes the value, at the end of `ids[start:]`."""
        if self._encode is None or not params.copy_values:
            return []
        openers, values = _encoded(params.copy_value_openers), _encoded(params.copy_values)
        longest = max(map(len, openers)) + MAX_VALUE_CHARS + 1
        tail, length, index = [], 0, len(ids)
        while length < longest and index > start:
            index -= 1
            tail.append(self._spelled[ids[index]])
            length += len(tail[-1])
        text = b"".join(reversed(tail))
        match = _VALUE_SO_FAR.search(text)
        so_far = match.group(0) if match else b""
        if len(so_far) >= MAX_VALUE_CHARS:
            return []
        before = text[: len(text) - len(so_far)]
        # the ids that lie wholly inside the value so far (not one that also holds
        # its opener, as `,-` does)
        inside: list[int] = []
        covered = 0
        for index in range(len(ids) - 1, start - 1, -1):
            width = len(self._spelled[ids[index]])
            if width == 0 or covered + width > len(so_far):
                break
            inside.append(ids[index])
            covered += width
        inside.reverse()
        found: set[int] = set()
        for opener, spelled, value in zip(openers, values, params.copy_values, strict=True):
            if len(spelled) <= len(so_far) or not spelled.startswith(so_far):
                continue
            if not _opened_by_value(before, opener):
                continue
            written = self._written(value)
            taken, width = 0, 0
            while width < len(so_far) and taken < len(written):
                width += len(self._spelled[written[taken]])
                taken += 1
            if width != len(so_far) or taken >= len(written) or len(inside) > taken:
                continue  # the value so far is written with other tokens
            if list(written[taken - len(inside) : taken]) != inside:
                continue
            found.add(written[taken])
        return sorted(found)

    def _written(self, value: str) -> tuple[int, ...]:
        """The ids the engine's tokenizer writes `value` with (kept)."""
        assert self._encode is not None
        written = self._value_ids.get(value)
        if written is None:
            written = self._value_ids[value] = tuple(self._encode(value))
            if len(self._value_ids) > MAX_VALUE_ENCODINGS:
                self._value_ids.popitem(last=False)
        else:
            self._value_ids.move_to_end(value)
        return written

    def _continuing(
        self,
        ids: Sequence[int],
        start: int,
        last_quote: int,
        params: CopySettings,
        scan: CopyScan | None = None,
    ) -> list[int]:
        """Inside a quoted text whose opening quote is in `ids[last_quote]`: the ids
        that go on spelling a listed name, or none when the text is not a name."""
        quote = params.copy_quote.encode()
        spelled = self._spelled[ids[last_quote]]
        cut = spelled.rfind(quote)
        openers = _encoded(params.copy_openers)
        if openers:
            need = max(map(len, openers)) + 1  # the longest opener and the byte before it
            before = self._before(ids, start, last_quote, spelled[:cut], need)
            if not _opened_by(before, openers):
                return []  # a quoted text that is not a name (a message, a value)
        names = params.copy_names
        if params.copy_distinct_openers:
            if scan is not None and scan.held_at == last_quote:
                held = scan.held
            else:
                before = self._before(ids, start, last_quote, spelled[:cut], MAX_DISTINCT_CHARS)
                pairs = zip(
                    _encoded(params.copy_distinct_after),
                    _encoded(params.copy_distinct_openers),
                    strict=True,
                )
                held = frozenset(_names_before(before, quote, pairs))
                if scan is not None:
                    scan.held_at, scan.held = last_quote, held
            if held:
                names = tuple(n for n in names if n.encode() not in held)
            if not names:
                return []
        so_far = spelled[cut + 1 :] + b"".join(self._spelled[t] for t in ids[last_quote + 1 :])
        key = (names, quote, so_far)
        found = self._continuations.get(key)
        if found is None:
            found = self._spelling_on(names, quote, so_far)
            self._continuations[key] = found
            if len(self._continuations) > MAX_CONTINUATIONS:
                self._continuations.popitem(last=False)
        return list(found)

    def _spelling_on(self, names: tuple[str, ...], quote: bytes, so_far: bytes) -> list[int]:
        """The ids that go on spelling one of `names` from `so_far`, up to and
        including the closing `quote`."""
        found: set[int] = set()
        for encoded in _encoded(names):
            if not encoded.startswith(so_far):
                continue
            rest = encoded[len(so_far) :] + quote
            for end in range(1, len(rest) + 1):
                found.update(self._by_bytes.get(rest[:end], ()))
            if len(rest) <= _LONGEST_START:  # the name ends inside a longer token
                found.update(self._by_start.get(rest, ()))
        return sorted(found)

    def _before(
        self,
        ids: Sequence[int],
        start: int,
        index: int,
        head: bytes,
        need: int,
    ) -> bytes:
        """The text before the quote in `ids[index]` (`head`, that token's part
        before it), back at least `need` bytes where there are, never before
        `start`."""
        parts = [head]
        length = len(head)
        while length < need and index > start:
            index -= 1
            spelled = self._spelled[ids[index]]
            parts.append(spelled)
            length += len(spelled)
        return b"".join(reversed(parts))

    def add(self, logits: torch.Tensor, boosts: Sequence[tuple[int, list[int], float]]) -> int:
        """Add (row, boosted ids, bias) to `logits` ([rows, vocab]) in place, the ids
        worked out before (the torch engine does so ahead of the forward, vLLM's
        processor in its `apply`). Returns how many rows had ids."""
        started = time.perf_counter()
        at_rows: list[int] = []
        at_ids: list[int] = []
        amounts: list[float] = []
        inside = 0
        for row, ids, bias in boosts:
            if ids:
                inside += 1
                at_rows += [row] * len(ids)
                at_ids += ids
                amounts += [bias] * len(ids)
        import torch  # loaded already: `logits` is one

        if at_ids and logits.device.type == "cpu" and logits.dtype == torch.float32:
            logits.numpy()[at_rows, at_ids] += amounts  # each (row, id) once: no add.at
        elif at_ids:  # vLLM on an accelerator
            device = logits.device
            index = (
                torch.tensor(at_rows, dtype=torch.long, device=device),
                torch.tensor(at_ids, dtype=torch.long, device=device),
            )
            logits.index_put_(
                index, torch.tensor(amounts, dtype=logits.dtype, device=device), accumulate=True
            )
        self.seconds += time.perf_counter() - started
        return inside


@lru_cache(maxsize=1024)
def _encoded(names: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(name.encode() for name in names)


def _opened_by_value(before: bytes, opener: bytes) -> bool:
    """Whether `before` ends with `opener`, which, when it starts with a letter,
    starts a word there (`mu(` opens, `emu(` does not; `,` after a digit opens)."""
    if not before.endswith(opener):
        return False
    if not (opener[:1].isalnum() or opener[:1] == b"_"):
        return True
    start = len(before) - len(opener)
    previous = before[start - 1 : start]
    return start == 0 or not (previous.isalnum() or previous == b"_")


def _names_before(before: bytes, quote: bytes, pairs: Iterable[tuple[bytes, bytes]]) -> set[bytes]:
    """The names a name opened at the end of `before` must differ from: for each
    (after, opener) pair that `before` ends with (opener), the name quoted right
    after `after` when only unquoted text follows it. `before` holds an even number
    of quotes (its name's opening one left out), so its last two quotes are a pair."""
    found: set[bytes] = set()
    for after, opener in pairs:
        if not _opened_by(before, (opener,)):
            continue
        head = before[: len(before) - len(opener)]
        close = head.rfind(quote)
        opening = head.rfind(quote, 0, close) if close > 0 else -1
        if opening >= 0 and _opened_by(head[:opening], (after,)):
            found.add(head[opening + len(quote) : close])
    return found


def _opened_by(before: bytes, openers: tuple[bytes, ...]) -> bool:
    """Whether `before` ends with an opener that starts a word there (`a(` opens,
    `ta(` does not)."""
    for opener in openers:
        if before.endswith(opener):
            start = len(before) - len(opener)
            previous = before[start - 1 : start]
            if start == 0 or not (previous.isalnum() or previous == b"_"):
                return True
    return False
