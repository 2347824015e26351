"""A series of binlog files read as one ordered stream: from a directory, a ``*.index`` file or a
list. ROTATE events link the files; a missing or misplaced file is a clear error.

A binlog directory is untrusted input: a file of a directory series (its numbered files, or the
entries of the index found in it) that resolves outside the directory is refused, so a planted
symlink or index line cannot make binlake read ``/etc/shadow`` or another server's binlogs into a
lake. An index file or files named explicitly are the caller's choice and are read where they point
(MySQL writes absolute paths to its index, and ``log_bin_index`` may live in another directory)."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from binlake.errors import SeriesError
from binlake.events.base import Event
from binlake.events.control import Rotate
from binlake.events.types import EventType
from binlake.reader import BINLOG_MAGIC, BinlogReader, check_magic

_NUMBERED = re.compile(r"^(?P<base>.+)\.(?P<num>\d+)$")


@dataclass(frozen=True)
class Position:
    """A place in a series: the file's index in the series, its path, a byte offset."""

    file_seq: int
    file: str
    offset: int

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}"


def _from_index(index: Path) -> list[Path]:
    out = []
    for line in index.read_text().splitlines():
        name = line.strip()
        if not name:
            continue
        p = Path(name)
        if not p.is_absolute():
            p = index.parent / p.name if not (index.parent / p).exists() else index.parent / p
        out.append(p)
    return out


def _numbered_files(directory: Path) -> list[Path]:
    files = []
    for p in directory.iterdir():
        m = _NUMBERED.match(p.name)
        # a dangling symlink is kept: it is reported as missing rather than silently left out
        if (p.is_file() or p.is_symlink()) and m and not p.name.endswith(".index"):
            files.append((m.group("base"), int(m.group("num")), p))
    bases = {b for b, _, _ in files}
    if len(bases) > 1:
        raise SeriesError(
            f"{directory} holds several binlog series ({', '.join(sorted(bases))}); name one index file"
        )
    return [p for _, _, p in sorted(files)]


def _refuse_foreign_links(files: list[Path], directory: Path) -> list[Path]:
    """``files`` when each resolves inside ``directory``; a link leading out of it is an error."""
    home = directory.resolve()
    for f in files:
        real = f.resolve()
        if not real.is_relative_to(home):
            link = f"a symlink to {real}" if f.is_symlink() else f"listed as {real}"
            raise SeriesError(
                f"{link}, outside {home}: refusing to read a file from outside the binlog directory "
                "(name the files themselves to read them)",
                source=str(f),
            )
    return files


def series_files(path: str) -> list[Path]:
    """The files a source names, in order: a directory (numbered binlogs or its .index), an index
    file, a glob (sorted by directory, then name), or one file."""
    if any(ch in path for ch in "*?["):
        files = [Path(p) for p in sorted(glob.glob(path), key=lambda p: (os.path.dirname(p), p))]
        for f in files:
            _refuse_foreign_links([f], f.parent)
        return files
    return BinlogSeries.open(path).files


def check_magic_of(path: Path, *, active: bool) -> None:
    """Raise ``BadMagicError`` unless the file starts with the binlog magic. The active (last) file
    of a series may be shorter than the magic: a server that has just created it writes it next."""
    with open(path, "rb") as f:
        head = f.read(len(BINLOG_MAGIC))
    if not (active and len(head) < len(BINLOG_MAGIC) and BINLOG_MAGIC.startswith(head)):
        check_magic(head, str(path))


_CLOSING = frozenset({EventType.STOP, EventType.ROTATE})
_CLOSING_MAX = 19 + 8 + 512 + 4  # header, position, a file name, checksum: the biggest ROTATE


def closes_cleanly(path: Path) -> bool:
    """Whether the file's last event is a ROTATE or STOP ending exactly at its end, which the server
    writes last to a file it closes: such a file is complete. Reads only the file's last bytes (a v4
    header's length and end position must both point at the end of the file)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(4, size - _CLOSING_MAX))
        tail = f.read()
    base = size - len(tail)
    for k in range(len(tail) - 19, -1, -1):
        if tail[k + 4] in _CLOSING:
            length = int.from_bytes(tail[k + 9 : k + 13], "little")
            end = int.from_bytes(tail[k + 13 : k + 17], "little")
            if length == len(tail) - k and end == base + len(tail):
                return True
    return False


class BinlogSeries:
    """Files in binlog order. ``events()`` yields (file sequence number, event) across all of them."""

    def __init__(self, files: list[Path], *, check_links: bool = True) -> None:
        if not files:
            raise SeriesError("no binlog files")
        missing = [str(f) for f in files if not f.exists()]
        if missing:
            raise SeriesError(f"missing binlog file(s): {', '.join(missing)}")
        self.files = files
        self.check_links = check_links

    @classmethod
    def open(cls, *paths: str | os.PathLike[str], check_links: bool = True) -> BinlogSeries:
        """A directory (its numbered files, or its ``*.index``), an index file, or files in order."""
        files: list[Path] = []
        for raw in paths:
            p = Path(raw)
            if p.is_dir():
                indexes = sorted(p.glob("*.index"))
                found = _from_index(indexes[0]) if len(indexes) == 1 else _numbered_files(p)
                if not found:
                    raise SeriesError(
                        "no binlog files here (numbered files such as binlog.000001, or one .index file)",
                        source=str(p),
                    )
                files += _refuse_foreign_links(found, p)
            elif p.suffix == ".index":
                files += _from_index(p)
            else:
                files.append(p)
        return cls(files, check_links=check_links)

    def _check_numbering(self) -> None:
        nums = []
        for f in self.files:
            m = _NUMBERED.match(f.name)
            nums.append((m.group("base"), int(m.group("num"))) if m else None)
        for (a, b), f in zip(zip(nums, nums[1:], strict=False), self.files[1:], strict=False):
            if a and b and a[0] == b[0] and b[1] <= a[1]:
                raise SeriesError(
                    f"{f} comes after a file numbered {a[1]}: files out of order", source=str(f)
                )

    def events(
        self, start: Position | None = None, stop: Position | None = None, **reader_options: object
    ) -> Iterator[tuple[int, Event]]:
        """Every event of the series from ``start`` (an event boundary) to before ``stop``."""
        self._check_numbering()
        for seq, f in enumerate(self.files):
            if start is not None and seq < start.file_seq:
                continue
            if stop is not None and seq > stop.file_seq:
                return
            reader = BinlogReader(
                f,
                start_position=start.offset if start is not None and seq == start.file_seq else None,
                stop_position=stop.offset if stop is not None and seq == stop.file_seq else None,
                **reader_options,  # type: ignore[arg-type]
            )
            rotate: Rotate | None = None
            for ev in reader:
                if isinstance(ev.body, Rotate) and ev.header.log_pos != 0:
                    rotate = ev.body
                yield seq, ev
            if self.check_links and rotate is not None and seq + 1 < len(self.files):
                nxt = self.files[seq + 1].name
                if rotate.next_file.rsplit("/", 1)[-1] != nxt:
                    raise SeriesError(
                        f"{f} rotates to {rotate.next_file}, but the next file of the series is {nxt}",
                        source=str(f),
                    )

    def position(self, file_seq: int, offset: int) -> Position:
        return Position(file_seq, str(self.files[file_seq]), offset)
