"""Where a grammar-constrained generation stands in its closing window, and which
ids its next token closes with: one rule for the torch engine's masker and vLLM's
grammar processor, so both close a plan at the same tokens.

A generation is closing in the last `close_within` tokens of `max_tokens`, or from
the moment the service asks it to (`ClosingEngine.set_closing`: its window then
starts there, `close_within` tokens long, or as many as the service says are left
before the limit it closes for, when fewer: a robot's segment limit may be nearer
than a whole window). In the window's first half it closes
softly: the grammar's end, else its `closing_ids` (a block's end), are taken where
the grammar allows them, and inside a statement the model's own choice goes on, so
no argument is cut short. In the second half (its last ceil(length / 2) tokens)
it closes hard: `hard_closing_ids` join them, which end an open name, call
and statement too. A statement that keeps going (a small model repeating the
letters of a name it has never seen) then still ends where the grammar may end,
instead of running past the segment limit unfinished.
"""

from __future__ import annotations


def banned_now(
    closers: tuple[int, ...], closing_ids: tuple[int, ...], banned_ids: tuple[int, ...]
) -> tuple[int, ...]:
    """The ids a closing row may not take now (`closers`, from `closing_ids_now`):
    its `closing_banned_ids` in the window's hard half, when it must end now; none
    in the soft half, where the model's own choice (a new condition too) goes on."""
    return banned_ids if len(closers) > len(closing_ids) else ()


def check_closing_within(within: int | None) -> None:
    """`ClosingEngine.set_closing`'s `within`: None or at least one token."""
    if within is not None and (isinstance(within, bool) or not isinstance(within, int)):
        raise ValueError(f"within must be an int (tokens left) or None, got {within!r}")
    if within is not None and within < 1:
        raise ValueError(f"within must be at least 1 token, got {within}")


def closing_ids_now(
    *,
    max_tokens: int,
    close_within: int,
    closing_ids: tuple[int, ...],
    hard_closing_ids: tuple[int, ...],
    generated: int,
    asked_at: int | None,
    asked_within: int | None = None,
) -> tuple[int, ...] | None:
    """The ids the next token closes with, most preferred first (the grammar's end,
    EOS, comes before all of them), or None when it is not closing. `generated`:
    ids past the prompt so far; `asked_at`: `generated` when the service asked it to
    close (None: not asked); `asked_within`: the tokens it then had left before the
    service's limit (None: a whole window), its window's length when fewer than
    `close_within`. Asked without a window (`close_within` 0) it closes softly for
    as long as it is asked."""
    left = max_tokens - generated  # this token included
    closing = left <= close_within
    hard = close_within > 0 and left <= (close_within + 1) // 2
    if asked_at is not None:
        closing = True
        if close_within > 0:
            window = close_within if asked_within is None else min(close_within, asked_within)
            hard = hard or asked_at + window - generated <= (window + 1) // 2
    if not closing:
        return None
    return closing_ids + hard_closing_ids if hard else closing_ids
