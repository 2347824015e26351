"""How much of a binlog series is complete, so a batch read of a live server's directory stops at
the last complete transaction instead of failing on what the server is still writing.

Only the active (last) file of a series grows: its unfinished tail (an event cut short, or a
transaction whose commit is not written yet) is "not yet written" and left for the next run. Every
earlier file has been rotated and can never grow: an unfinished tail there means the file was cut or
damaged, a clear error. A file closed by the server ends with a ROTATE or STOP, which is checked
from its last bytes; only files that do not end that way are scanned (header-only).
"""

from __future__ import annotations

import os
from pathlib import Path

from binlake.errors import IncompleteTailError
from binlake.position import TailScan
from binlake.series import SeriesError, check_magic_of, closes_cleanly, series_files


def complete_end(scan: TailScan, *, active: bool) -> int | None:
    """Where reading a scanned file must stop: None when all of it is complete; for the active file,
    just past its last complete transaction. A rotated file with an unfinished tail is an error; so
    is, in any file, an event longer than the size ceiling (``SizeLimitError`` from the scan): no
    growth makes it readable, so it is never a tail to wait for."""
    scan.finish()
    if scan.unfinished is None:
        return None
    if not active:
        raise IncompleteTailError(
            f"{scan.unfinished} at the end of the file, but a later file of the series follows it: "
            "a rotated file never grows, so this one was cut or damaged",
            source=scan.path,
            offset=scan.unfinished_at,
        )
    return scan.boundary


def still_writing(scan: TailScan) -> str:
    """The warning for an active file read up to its last complete transaction."""
    return (
        f"{scan.path} is still being written ({scan.unfinished} at offset {scan.unfinished_at}): "
        f"reading up to offset {scan.boundary}, the end of its last complete transaction"
    )


def just_created(path: str | os.PathLike[str], *, active: bool) -> bool:
    """An active file holding no more than the magic: the server has only just created it."""
    return active and os.path.getsize(path) <= 4


def needs_scan(path: str | os.PathLike[str], *, active: bool) -> bool:
    """Whether a file's tail must be scanned to know where its complete part ends: not when it ends
    with the ROTATE/STOP of a closed file, nor when the server has only just created it."""
    return not just_created(path, active=active) and not closes_cleanly(Path(path))


def check_source(path: str) -> list[Path]:
    """What can be told about a batch source without reading it whole, before Spark starts: it
    exists and names one series, no file of it links outside its directory, every file is a binlog,
    and every file but the last is complete. The files, in order."""
    files = series_files(path)
    if not files:
        raise SeriesError(f"no binlog files match {path}")
    for i, f in enumerate(files):
        active = i == len(files) - 1
        check_magic_of(f, active=active)
        if not active and needs_scan(f, active=False):
            complete_end(TailScan(f), active=False)
    return files


def check_stream_source(path: str) -> None:
    """What can be told about a followed source before Spark starts: it may hold no binlog yet (the
    stream waits for them), but the directory to wait in must exist; files already there are
    checked as a batch source's are."""
    where = Path(os.path.dirname(path) or ".") if any(ch in path for ch in "*?[") else Path(path)
    if not where.exists():
        raise SeriesError(f"{where}: no such file or directory to follow")
    if where.is_dir() and where == Path(path) and not any(where.iterdir()):
        return  # nothing written yet
    check_source(path)
