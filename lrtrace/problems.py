"""Every problem of a bad input at once, one per line, each saying where it is.

Someone fixing a hand-edited trace or workload wants the whole list, not the first
problem and a count of the others: each round trip through the tool would otherwise
reveal one more. Long lists are capped (`MAX_SHOWN`), saying how many were left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pydantic import ValidationError

MAX_SHOWN: Final = 20
_ID_KEYS: Final = ("task_id", "agent_id")  # how a list item is called in the document


class Problems(ValueError):
    """Several problems a model validator found together, each `where: what`: they
    are listed one per line rather than folded into one message."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = list(lines)


def a_or_an(noun: str) -> str:
    """`a drone`, `an arm`: messages name robot types, which start with either."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def listing(lines: Sequence[str], cap: int = MAX_SHOWN) -> str:
    """One problem as itself (one line); several as `N problems:` and one indented
    line each, at most `cap` of them, then how many more there are."""
    if len(lines) == 1:
        return lines[0]
    shown = [f"  {line}" for line in lines[:cap]]
    if len(lines) > cap:
        shown.append(f"  (+{len(lines) - cap} more)")
    return "\n".join([f"{len(lines)} problems:", *shown])


def validation_problems(
    err: ValidationError, doc: object = None, root: str = "document"
) -> list[str]:
    """Each problem of `err` as `where: what`. `doc`, the validated input, names the
    items of its lists (`tasks.3.arrival_s (t00003)`); `root` names a problem of the
    whole document."""
    out: list[str] = []
    for e in err.errors():
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, Problems):
            out.extend(cause.lines)
            continue
        msg = str(e["msg"]).removeprefix("Value error, ")
        out.append(f"{where(e['loc'], doc) or root}: {msg}")
    return out


def where(loc: Sequence[int | str], doc: object = None) -> str:
    """`tasks.3.arrival_s`, followed by the id of the list item where `doc` has one
    (`tasks.3.arrival_s (t00003)`), so the user can search the file for it."""
    node = doc
    named = ""
    for key in loc:
        if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
            named = named or _id_of(node)
        else:
            node = node.get(key) if isinstance(node, dict) else None
    path = ".".join(str(key) for key in loc)
    return f"{path} ({named})" if named and path else path


def _id_of(item: object) -> str:
    """The task id of a task of the document, the agent id of an agent, else ``."""
    if isinstance(item, dict):
        for key in _ID_KEYS:
            if isinstance(item.get(key), str):
                return str(item[key])
    return ""
