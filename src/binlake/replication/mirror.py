"""Mirror a server's binlog files into a directory, byte for byte (``mysqlbinlog --raw --stop-never``
done right): same names, same bytes, an index file, rotation when the server rotates.

Only events that sit in the server's files are written (``StreamEvent.in_file``). A file the server is
still writing carries the in-use flag in its FORMAT_DESCRIPTION, as on the server (the dump sends it
cleared); the flag is cleared when the file's closing ROTATE or STOP arrives. After a reconnect the
server sends the unfinished transaction again: the file is cut back to where it starts, so a reader
of the mirror never sees a transaction twice. Restarting ``binlake mirror`` cuts the last file back
to its last complete transaction and continues from there.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from binlake.errors import ReplicationError
from binlake.events.types import FLAG_BINLOG_IN_USE, EventType
from binlake.position import transaction_ends
from binlake.reader import BINLOG_MAGIC, FIRST_EVENT
from binlake.replication.client import FilePosition
from binlake.replication.stream import StreamEvent

FLAGS_AT = FIRST_EVENT + 17  # the FORMAT_DESCRIPTION's header flags, right after the magic
CLOSING_EVENTS = (EventType.ROTATE, EventType.STOP)


class Mirror:
    """Write ``StreamEvent``s into ``directory``; ``resume_point()`` says where to ask the server."""

    def __init__(self, directory: str | os.PathLike[str], index_name: str | None = None) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        self.index_name = index_name
        self.name: str | None = None
        self._fd: int | None = None
        self.size = 0
        self.bytes_written = 0
        self.files_written = 0

    # -- the index ----------------------------------------------------------------------------

    def _index(self) -> Path | None:
        if self.index_name:
            return self.dir / self.index_name
        found = sorted(self.dir.glob("*.index"))
        return found[0] if found else None

    def files(self) -> list[str]:
        index = self._index()
        if index is None or not index.exists():
            return []
        return [Path(line.strip()).name for line in index.read_text().splitlines() if line.strip()]

    def _add_to_index(self, name: str) -> None:
        if self.index_name is None:
            self.index_name = (self._index() or self.dir / (name.rsplit(".", 1)[0] + ".index")).name
        index = self.dir / self.index_name
        if name not in self.files():
            with open(os.open(index, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640), "a") as f:
                f.write(f"./{name}\n")

    # -- resuming -----------------------------------------------------------------------------

    def resume_point(self) -> FilePosition | None:
        """The end of the last complete transaction mirrored so far (the file is cut back to it),
        or None for an empty directory."""
        names = self.files()
        if not names:
            return None
        last = self.dir / names[-1]
        if not last.exists() or last.stat().st_size < FIRST_EVENT:
            return FilePosition(names[-1], FIRST_EVENT)
        end = max(transaction_ends(last), default=FIRST_EVENT)
        with last.open("r+b") as f:
            f.truncate(end)
        return FilePosition(names[-1], end)

    # -- writing ------------------------------------------------------------------------------

    def _open(self, name: str) -> None:
        self.close()
        path = self.dir / name
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)  # rows and DDL: not for every user
        self.name = name
        self.size = os.fstat(self._fd).st_size
        self._add_to_index(name)
        self.files_written += 1

    def write(self, item: StreamEvent) -> bool:
        """Append the event if it belongs in the server's files; True when written."""
        if not item.in_file:
            return False
        if item.file != self.name:
            self._open(item.file)
        assert self._fd is not None
        if self.size < FIRST_EVENT:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, BINLOG_MAGIC, 0)
            self.size = FIRST_EVENT
        if item.start < self.size:  # sent again after a reconnect: the server's bytes win
            os.ftruncate(self._fd, item.start)
            self.size = item.start
        elif item.start > self.size:
            raise ReplicationError(
                f"gap in the mirror of {item.file}: next event at {item.start}, file ends at {self.size}",
                source=str(self.dir / item.file),
                offset=self.size,
            )
        raw = item.raw
        code = item.event.type_code
        if item.start == FIRST_EVENT and code == EventType.FORMAT_DESCRIPTION:
            raw = _with_in_use(raw)  # the server's own copy says "being written"
        os.pwrite(self._fd, raw, item.start)
        self.size += len(raw)
        self.bytes_written += len(raw)
        if code in CLOSING_EVENTS:
            self._mark_closed()
        return True

    def _mark_closed(self) -> None:
        assert self._fd is not None
        head = os.pread(self._fd, 19, FIRST_EVENT)
        if len(head) == 19 and head[4] == EventType.FORMAT_DESCRIPTION:
            flags = struct.unpack_from("<H", head, 17)[0] & ~FLAG_BINLOG_IN_USE
            os.pwrite(self._fd, struct.pack("<H", flags), FLAGS_AT)
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
            self.name = None


def _with_in_use(raw: bytes) -> bytes:
    """A FORMAT_DESCRIPTION with the in-use flag set (its CRC covers the flag cleared: unchanged)."""
    flags = struct.unpack_from("<H", raw, 17)[0] | FLAG_BINLOG_IN_USE
    return raw[:17] + struct.pack("<H", flags) + raw[19:]
