"""Where rich output goes: full width when piped, progress only on a terminal."""

from __future__ import annotations

import sys
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


def plain(text: str) -> Any:
    """Text from a binlog (database, table and column names, file names) for a rich table cell or
    line: never read as rich markup (a table named ``[link=…]x[/link]`` stays those characters),
    control characters shown as ``\\xNN`` (no terminal escape sequence reaches the terminal)."""
    from rich.text import Text

    from binlake.dialects.mysql import comment_text

    return Text(comment_text(text).replace("\x7f", "\\x7f"))


def progress_wanted(*, streams_output: bool) -> bool:
    """Whether to draw a progress bar (on stderr): only for a person at a terminal. Never when
    stderr is not a terminal, never when stdout is a pipe (another program, or a pager sharing the
    terminal, reads it), and not when a command that streams its output (dump, sql) writes it to
    the same terminal, where the bar would tear its lines."""
    import os
    import stat

    if not sys.stderr.isatty():
        return False
    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (OSError, ValueError, AttributeError):  # no real stdout (captured): nothing to go by
        return False
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return False
    return not (streams_output and sys.stdout.isatty())


class ByteProgress:
    """A transient bar of bytes done out of ``total`` on stderr, or nothing (``progress_wanted``).
    ``advance_to`` is cheap to call per event: the bar is redrawn at most every 0.1% of the total."""

    def __init__(self, total: int, label: str, *, streams_output: bool) -> None:
        self.total, self.label, self._next = max(total, 1), label, 0
        self._bar: Any = None
        self._task: Any = None
        self.enabled = progress_wanted(streams_output=streams_output)

    def __enter__(self) -> ByteProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total)
        return self

    def advance_to(self, done: int) -> None:
        if self._bar is not None and done >= self._next:
            self._bar.update(self._task, completed=done)
            self._next = done + self.total // 1000

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
