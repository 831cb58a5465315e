"""The scene text a task plans in, as the planner sees it: `kind: a, b; kind: c`
(e.g. "on table: cup, pen; places: tray, bin" or "visible: sofa, lamp")."""

from __future__ import annotations


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
