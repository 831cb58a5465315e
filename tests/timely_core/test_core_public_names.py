"""Every name the docs tell a user to import from timely_core imports, and the
package's public face is re-exported at its top."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import timely_core

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("timely_core/**/README.md")]
IMPORT = re.compile(r"from (timely_core[\w.]*) import (\([^)]*\)|[\w, ]+)")
COMMENT = re.compile(r"#[^\n]*")
DOTTED = re.compile(r"`(timely_core(?:\.\w+)+)")


def documented_imports() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = COMMENT.sub("", doc.read_text(encoding="utf-8"))  # code comments, headings
        for module, names in IMPORT.findall(text):
            names = names.strip("()")
            found += [(module, n.strip()) for n in names.split(",") if n.strip()]
    return sorted(set(found))


def documented_paths() -> list[str]:
    return sorted({p for doc in DOCS for p in DOTTED.findall(doc.read_text(encoding="utf-8"))})


def test_the_docs_name_some_imports() -> None:
    assert len(documented_imports()) >= 10 and len(documented_paths()) >= 5


@pytest.mark.parametrize(("module", "name"), documented_imports())
def test_a_documented_import_works(module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name), f"{module} has no {name}"


@pytest.mark.parametrize("path", documented_paths())
def test_a_documented_dotted_name_resolves(path: str) -> None:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            assert hasattr(obj, attr), f"{path}: no {attr}"
            obj = getattr(obj, attr)
        return
    pytest.fail(f"{path} does not import")


def test_the_public_face_is_re_exported_at_the_top() -> None:
    for name in timely_core.__all__:
        assert getattr(timely_core, name) is not None
    assert timely_core.PlanningService.__module__ == "timely_core.service"
