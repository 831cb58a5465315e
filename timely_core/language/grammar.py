"""A plan language may bring a grammar: then every token the engine decodes for its
robots is masked by it, so no statement the robot's parser would reject can be
written (issue #21). Optional: the chat language has none and stays unconstrained.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Protocol, runtime_checkable

from timely_core.engine.copy_bias import usable_name, usable_opener, usable_value
from timely_core.engine.protocol import SamplingParams

log = logging.getLogger(__name__)


@runtime_checkable
class GrammarLanguage(Protocol):
    """A `PlanLanguage` whose plans follow a grammar the engine can enforce."""

    def grammar(self) -> str | None:
        """The grammar of a whole plan (generated tokens only, ending at EOS), in
        llguidance's Lark syntax (`SamplingParams.grammar`); None for no grammar."""


@runtime_checkable
class RequestGrammarLanguage(Protocol):
    """Optional: a grammar language whose grammar can depend on the request, e.g. to
    allow as object names only what the request and its scene name."""

    def request_grammar(self, scene: str, instruction: str) -> str | None:
        """The grammar of plans for this request (as `grammar()`), or None for none."""


@runtime_checkable
class ClosingGrammarLanguage(Protocol):
    """Optional: a grammar language with texts that close what a plan has open."""

    def grammar_closers(self) -> tuple[str, ...]:
        """Texts (each one token) that end an open construct where its grammar
        allows them, most preferred first: a plan near its token limit takes them
        to finish (`SamplingParams.closing_ids`)."""


@runtime_checkable
class HardClosingGrammarLanguage(Protocol):
    """Optional: a closing grammar language with texts that also end what is open
    inside a statement (a name, a call), for the hard half of a closing window."""

    def grammar_hard_closers(self) -> tuple[str, ...]:
        """Texts (each one token), most preferred first, tried after
        `grammar_closers` once a plan must end now (`SamplingParams.hard_closing_ids`)."""


@runtime_checkable
class ClosingBansLanguage(Protocol):
    """Optional: a closing grammar language with texts that open a new nested
    statement, which a closing plan should not open."""

    def grammar_closing_bans(self) -> tuple[str, ...]:
        """Texts that open a nested statement (a condition): once a plan must end now
        (a closing window's hard half), no token that contains one is taken as long
        as another is allowed (`SamplingParams.closing_banned_ids`)."""


@runtime_checkable
class CopyingLanguage(Protocol):
    """Optional: a grammar language that can list the names a request gives, for
    the engine's copy bias (`SamplingParams.copy_names`)."""

    def request_names(self, scene: str, instruction: str) -> tuple[str, ...]:
        """The object names this request and its scene give, as the plan would
        quote them (without the quote)."""

    def name_quote(self) -> str:
        """The one character that opens and closes a quoted name in a plan."""

    def name_openers(self) -> tuple[str, ...]:
        """The texts that come right before the quote opening a name (a skill's
        object argument), so a quoted free-text message is not biased; empty:
        every quoted text is a name."""


@runtime_checkable
class DistinctNamesLanguage(Protocol):
    """Optional: a copying language where some names must differ from the name
    right before them (a held object is not placed on itself)."""

    def distinct_names(self) -> tuple[tuple[str, str], ...]:
        """(after, opener) pairs: a name opened right after `opener` is never the
        name quoted right after `after` when only unquoted text lies between that
        name and `opener`, e.g. `("pk(", "pl(")` and `("st(", ",")`."""


@runtime_checkable
class ValueCopyingLanguage(Protocol):
    """Optional: a grammar language that can list the numbers a request states,
    for the engine's copy bias on values (`SamplingParams.copy_values`)."""

    def request_values(self, scene: str, instruction: str) -> tuple[tuple[str, str], ...]:
        """(opener, value) pairs: a value as the plan would write it, after the text
        that opens the argument it belongs in (e.g. `("mu(", "100")` for "go up 1
        meter")."""


def language_grammar(language: object, request: tuple[str, str] | None = None) -> str | None:
    """The grammar of `language`, or None when it has none. With `request` (scene,
    instruction), a `RequestGrammarLanguage`'s grammar for that request."""
    if request is not None and isinstance(language, RequestGrammarLanguage):
        return language.request_grammar(*request)
    if isinstance(language, GrammarLanguage):
        return language.grammar()
    return None


def language_closers(language: object) -> tuple[str, ...]:
    """The closing texts of `language`'s grammar (none when it declares none)."""
    if isinstance(language, ClosingGrammarLanguage):
        return language.grammar_closers()
    return ()


def language_hard_closers(language: object) -> tuple[str, ...]:
    """The hard closing texts of `language`'s grammar (none when it declares none)."""
    if isinstance(language, HardClosingGrammarLanguage):
        return language.grammar_hard_closers()
    return ()


def language_closing_bans(language: object) -> tuple[str, ...]:
    """The texts `language`'s closing plans do not open (none when it declares none)."""
    if isinstance(language, ClosingBansLanguage):
        return language.grammar_closing_bans()
    return ()


def language_copy_names(language: object, scene: str, instruction: str) -> tuple[str, ...]:
    """The names a request gives, for `language`'s copy bias (none when it lists none)."""
    if isinstance(language, CopyingLanguage):
        return language.request_names(scene, instruction)
    return ()


def language_quote(language: object) -> str:
    """The quote of `language`'s names (`'` when it does not say)."""
    return language.name_quote() if isinstance(language, CopyingLanguage) else "'"


def language_name_openers(language: object) -> tuple[str, ...]:
    """What comes right before a name's opening quote in `language`'s plans (none
    when it does not say: every quoted text is a name)."""
    return language.name_openers() if isinstance(language, CopyingLanguage) else ()


def with_copy_bias(
    sampling: SamplingParams,
    language: object,
    scene: str,
    instruction: str,
    bias: float,
    names: bool = True,
) -> SamplingParams:
    """`sampling` with `language`'s copy bias on the names of this request and, for
    a `ValueCopyingLanguage`, on the numbers it states (as is when the language
    lists neither, or its quote is not one character). A name, value or opener the
    engine would refuse is left out, not failed on. `names=False`: numbers only
    (a grammar of grounded names already allows no other names)."""
    quote = language_quote(language)
    if bias <= 0 or len(quote) != 1:
        return sampling
    try:
        listed = language_copy_names(language, scene, instruction) if names else ()
        stated = language_copy_values(language, scene, instruction)
        distinct = language_distinct_names(language) if listed else ()
    except Exception:  # a language's lookup is a hint: the request is planned without
        log.warning("the copy bias's lookups failed for %r", instruction, exc_info=True)
        return sampling
    names_ = tuple(n for n in listed if usable_name(n, quote))
    distinct = tuple(
        pair
        for pair in distinct
        if isinstance(pair, tuple)
        and len(pair) == 2
        and usable_opener(pair[0])
        and usable_opener(pair[1])
    )
    pairs = tuple(
        (pair[0], pair[1])
        for pair in stated
        if isinstance(pair, tuple)
        and len(pair) == 2
        and usable_opener(pair[0])
        and usable_value(pair[1])
    )
    if not names_ and not pairs:
        return sampling
    return dataclasses.replace(
        sampling,
        copy_names=names_,
        copy_bias=bias,
        copy_quote=quote,
        copy_openers=tuple(o for o in language_name_openers(language) if usable_opener(o)),
        copy_values=tuple(value for _, value in pairs),
        copy_value_openers=tuple(opener for opener, _ in pairs),
        copy_distinct_after=tuple(after for after, _ in distinct) if names_ else (),
        copy_distinct_openers=tuple(opener for _, opener in distinct) if names_ else (),
    )


def language_distinct_names(language: object) -> tuple[tuple[str, str], ...]:
    """`language`'s (after, opener) pairs of names that must differ (none when it
    declares none)."""
    if isinstance(language, DistinctNamesLanguage):
        return language.distinct_names()
    return ()


def language_copy_values(
    language: object, scene: str, instruction: str
) -> tuple[tuple[str, str], ...]:
    """The (opener, value) pairs a request states, for `language`'s copy bias on
    values (none when it lists none)."""
    if isinstance(language, ValueCopyingLanguage):
        return language.request_values(scene, instruction)
    return ()
