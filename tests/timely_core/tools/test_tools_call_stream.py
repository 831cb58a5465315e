"""The service's streaming call parser: partial and complete calls, as decoded, for
any chunking of the text."""

from __future__ import annotations

from timely_core.tools.call_stream import CallEvent, CallStream, literal
from timely_core.tools.plugin import Unresolved

PLAN = (
    "_x=ds('cat, (dog)');?iv('cat')==True{o('cat');mf(ds(_x), 3.5, True, -2);}"
    "3{tu(90);}visit('a', \"b\",'c');noargs();"
)


def events(text: str, chunk: int) -> list[CallEvent]:
    stream = CallStream()
    out: list[CallEvent] = []
    for i in range(0, len(text), chunk):
        out.extend(stream.feed(text[i : i + chunk]))
    return out


def test_complete_calls_in_order_with_their_literal_arguments() -> None:
    complete = [(e.skill, e.args) for e in events(PLAN, 1) if e.complete]
    assert complete == [
        ("ds", ("cat, (dog)",)),
        ("iv", ("cat",)),
        ("o", ("cat",)),
        ("ds", (Unresolved("_x"),)),
        ("mf", (Unresolved("ds(_x)"), 3.5, True, -2)),
        ("tu", (90,)),
        ("visit", ("a", "b", "c")),
        ("noargs", ()),
    ]


def test_partial_calls_report_each_argument_once_as_soon_as_it_is_known() -> None:
    visit = [e for e in events(PLAN, 1) if e.skill == "visit"]
    assert [(e.args, e.complete) for e in visit] == [
        (("a",), False),  # at the closing quote, before the ','
        (("a", "b"), False),
        (("a", "b", "c"), False),
        (("a", "b", "c"), True),
    ]
    assert visit[0].text == "visit('a'"
    assert visit[-1].text == "visit('a', \"b\",'c')"
    numbers = [e.args for e in events(PLAN, 1) if e.skill == "mf"]
    assert numbers[:2] == [(Unresolved("ds(_x)"),), (Unresolved("ds(_x)"), 3.5)]


def test_any_chunking_gives_the_same_events() -> None:
    one = events(PLAN, 1)
    for chunk in (2, 3, 7, len(PLAN)):
        assert events(PLAN, chunk) == one


def test_call_indexes_follow_the_order_of_opening() -> None:
    found = {(e.skill, e.index) for e in events(PLAN, 1) if e.complete}
    assert ("mf", 3) in found and ("ds", 4) in found  # the nested call opened after mf


def test_literals() -> None:
    assert literal(" 'a b' ") == "a b"
    assert literal('"q"') == "q"
    assert literal("-12") == -12
    assert literal("0.5") == 0.5
    assert literal("False") is False
    assert literal("_v") == Unresolved("_v")
    assert literal("'a' + 'b'") == Unresolved("'a' + 'b'")


def test_a_string_with_more_after_it_becomes_unresolved() -> None:
    calls = [e for e in events("f('a' + 'b', 2);", 1) if e.skill == "f"]
    assert calls[0].args == ("a",)  # reported when the quote closed
    assert calls[-1].args == (Unresolved("'a' + 'b'"), 2)
