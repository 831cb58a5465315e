"""Figure files: matplotlib picks the format from the file's extension, and refuses one
it cannot write only in `savefig`, after the search or replay the figure shows; so a
figure path is checked with the other outputs, before the work."""

from __future__ import annotations

from pathlib import Path

from lrtrace.errors import LrtraceError


def supported() -> list[str]:
    """The extensions matplotlib writes figures as (with its Agg backend, ours)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return sorted(FigureCanvasAgg.get_supported_filetypes())


def check_figure_path(path: Path, flag: str) -> None:
    """Refuse a figure file whose extension matplotlib cannot write (or that has none:
    matplotlib would add `.png` to the name, and the file would not be where we say)."""
    extension = path.suffix.lower().removeprefix(".")
    formats = supported()
    if extension in formats:
        return
    problem = (
        f"matplotlib cannot write .{extension} figures"
        if extension
        else "no extension to name the figure's format"
    )
    raise LrtraceError(f"{flag} {path}: {problem}; use one of {', '.join(formats)}")
