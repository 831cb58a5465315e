"""The scene text a task plans in, as the planner sees it: `kind: a, b; kind: c`
(e.g. "on table: cup, pen; places: tray, bin" or "visible: sofa, lamp"). People
and other clients also write it freely ("a sofa, a cat under the table"): whether
the scene names an object is asked of the words (`scene_has`), not of exact items."""

from __future__ import annotations

import re

# words that open a noun phrase without naming anything
_DETERMINERS = frozenset({"a", "an", "the", "some", "one", "two", "several", "my", "your"})
_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")


def scene_parts(scene: str) -> dict[str, tuple[str, ...]]:
    """Names by kind ("on table", "places", "bins", "visible", ...), in order.
    Text without a `kind:` is listed under ""."""
    parts: dict[str, tuple[str, ...]] = {}
    for part in scene.split(";"):
        kind, sep, names = part.partition(":")
        if not sep:
            kind, names = "", kind
        items = tuple(n.strip() for n in names.split(",") if n.strip())
        if items:
            key = kind.strip().lower()
            parts[key] = parts.get(key, ()) + items
    return parts


def scene_names(scene: str) -> frozenset[str]:
    """Every object, place or bin the scene names."""
    return frozenset(name for names in scene_parts(scene).values() for name in names)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def scene_has(scene: str, name: str) -> bool:
    """Whether `scene` names `name`: its words (leading determiners left out, case
    ignored) appear together in one item of the scene ("cup" in "a cup, a tray";
    "cat" in "a cat under the table"; not "cup" in "cupboard")."""
    target = _words(name)
    while target and target[0] in _DETERMINERS:
        target = target[1:]
    if not target:
        return False
    n = len(target)
    for items in scene_parts(scene).values():
        for item in items:
            words = _words(item)
            if any(words[i : i + n] == target for i in range(len(words) - n + 1)):
                return True
    return False
