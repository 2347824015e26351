"""Where rich output goes: full width when piped, progress only on a terminal."""

from __future__ import annotations

from typing import Any

PIPED_WIDTH = 10_000  # wide enough that no path or value is cut; tables still size to their content


def output_console(**kwargs: Any) -> Any:
    """A rich Console for stdout. On a terminal it fits the window; piped or redirected, rich would
    assume 80 columns and cut paths in tables (``…``), so it gets a width nothing reaches."""
    from rich.console import Console

    probe = Console(**kwargs)
    if probe.is_terminal:
        return probe
    return Console(width=PIPED_WIDTH, **kwargs)
