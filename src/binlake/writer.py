"""Writing binlogs: encoded events with headers, positions, CRC32, rotation and an index file.

The files are what a server of the chosen flavor writes (MySQL 5.7, MySQL 8.0, MariaDB), so
mysqlbinlog-style tools and binlake itself read them. Rotation happens only between transactions.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binlake.events import encode_body
from binlake.events.base import HEADER_V4, FormatDescription
from binlake.events.control import Rotate, Stop
from binlake.events.gtid import Gtid, MariaBinlogCheckpoint, MariaGtid, MariaGtidList, PreviousGtids
from binlake.events.types import FLAG_BINLOG_IN_USE, FLAG_IGNORABLE, EventType
from binlake.gtid import GtidAccumulator
from binlake.reader import BINLOG_MAGIC
from binlake.wire import crc32

_MYSQL57 = bytes([56, 13, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0, 95, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0, 10, 10, 10, 42, 42, 0, 18, 52, 0])  # fmt: skip
_MYSQL80 = bytes([0, 13, 0, 8, 0, 0, 0, 0, 4, 0, 4, 0, 0, 0, 98, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0, 10, 10, 10, 42, 42, 0, 18, 52, 0, 10, 40, 0])  # fmt: skip
_MARIADB = (
    bytes(
        [
            56,
            13,
            0,
            8,
            0,
            18,
            0,
            4,
            4,
            4,
            4,
            18,
            0,
            0,
            228,
            0,
            4,
            26,
            8,
            0,
            0,
            0,
            8,
            8,
            8,
            2,
            0,
            0,
            0,
            10,
            10,
            10,
        ]
    )  # fmt: skip
    + bytes(6)
    + bytes([10, 10, 10])
    + bytes(119)  # types 42..160: none of MariaDB's (160, ANNOTATE_ROWS, has no post-header)
    + bytes([4, 19, 4, 0, 13, 8, 8, 8, 10, 10, 10])  # 161..171
)


@dataclass(frozen=True)
class Flavor:
    """What kind of server the files look written by."""

    name: str
    server_version: str
    post_header_lengths: bytes
    mariadb: bool = False
    null_padding: bool = True  # unused NULL-bitmap bits: 1 (5.7, MariaDB) or 0 (MySQL 8)
    commit_timestamps: bool = False  # GTID events carry commit timestamps (MySQL 8)


FLAVORS = {
    "mysql57": Flavor("mysql57", "5.7.44-log", _MYSQL57),
    "mysql80": Flavor("mysql80", "8.0.36", _MYSQL80, null_padding=False, commit_timestamps=True),
    "mariadb": Flavor("mariadb", "10.11.6-MariaDB-log", _MARIADB, mariadb=True),
}


# Events MySQL writes with LOG_EVENT_IGNORABLE_F (older readers, and MariaDB's, skip them)
IGNORABLE_TYPES = frozenset({EventType.ROWS_QUERY})


class BinlogWriter:
    """Append events to ``directory/basename.NNNNNN`` files, rotating at ``max_file_size``."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        basename: str = "binlog",
        flavor: str | Flavor = "mysql80",
        checksum: bool = True,
        server_id: int = 1,
        max_file_size: int | None = None,
        created: int = 0,
        first_number: int = 1,
        resume_at: int | None = None,
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.basename = basename
        self.flavor = FLAVORS[flavor] if isinstance(flavor, str) else flavor
        self.server_id = server_id
        self.max_file_size = max_file_size
        self.fde = FormatDescription(
            4,
            self.flavor.server_version,
            created,
            19,
            self.flavor.post_header_lengths,
            1 if checksum else 0,
            is_mariadb=self.flavor.mariadb,
        )
        self.executed = GtidAccumulator()
        self.maria_state: dict[int, tuple[int, int]] = {}
        self.number = first_number - 1
        self.files: list[Path] = []
        self._f: Any = None
        self.pos = 0
        if resume_at is None:
            self._open(created)
        else:
            self._reopen(resume_at)

    @property
    def path(self) -> Path:
        return self.files[-1]

    def _name(self, number: int) -> str:
        return f"{self.basename}.{number:06d}"

    def _open(self, timestamp: int) -> None:
        self.number += 1
        path = self.dir / self._name(self.number)
        self.files.append(path)
        self._f = open(path, "wb")  # noqa: SIM115 - kept open across calls, closed by rotate/close
        self._f.write(BINLOG_MAGIC)
        self.pos = 4
        self.event(EventType.FORMAT_DESCRIPTION, self.fde, timestamp)
        if self.flavor.mariadb:
            gtids = sorted((d, s, n) for d, (s, n) in self.maria_state.items())
            self.event(EventType.MARIA_GTID_LIST, MariaGtidList(0, gtids), timestamp)
            self.event(EventType.MARIA_BINLOG_CHECKPOINT, MariaBinlogCheckpoint(path.name), timestamp)
        else:
            prev = self.executed.freeze()
            self.event(EventType.PREVIOUS_GTIDS, PreviousGtids(prev.as_dict()), timestamp)
        # the index names a file only once its header is out of this process: a crash never leaves
        # an index naming a file that does not exist yet
        self._f.flush()
        with open(self.dir / f"{self.basename}.index", "a") as ix:
            ix.write(f"./{path.name}\n")

    def _reopen(self, offset: int) -> None:
        """Continue file ``number`` (already in the index, written by a writer of this flavor) at
        ``offset``, cutting what follows: a restart after a crash appends exactly where an
        uninterrupted writer would. Its executed GTIDs are not re-read (a series that carries GTIDs
        must not be continued this way)."""
        self.number += 1
        path = self.dir / self._name(self.number)
        self.files.append(path)
        self._f = open(path, "r+b")  # noqa: SIM115 - kept open across calls, closed by rotate/close
        self._f.truncate(offset)
        self._f.seek(offset)
        self.pos = offset

    def encode(self, type_code: int, body: Any) -> bytes:
        """The body bytes of an event as this writer writes them."""
        if hasattr(body, "null_padding") and getattr(body, "table", None) is not None:
            body.null_padding = self.flavor.null_padding
        return encode_body(type_code, body, self.fde)

    def event(
        self,
        type_code: int,
        body: Any,
        timestamp: int,
        *,
        server_id: int | None = None,
        flags: int = 0,
        data: bytes | None = None,
    ) -> tuple[Path, int]:
        """Write one event (``data``: its body bytes when already encoded); returns (file, offset)."""
        if data is None:
            data = self.encode(type_code, body)
        if type_code in IGNORABLE_TYPES:
            flags |= FLAG_IGNORABLE  # as servers flag them: readers that do not know them skip them
        csum = (
            4
            if self.fde.checksum_alg is not None
            and (self.fde.checksum_alg == 1 or type_code == EventType.FORMAT_DESCRIPTION)
            else 0
        )
        size = 19 + len(data) + csum
        offset = self.pos
        head = HEADER_V4.pack(
            timestamp,
            type_code,
            self.server_id if server_id is None else server_id,
            size,
            offset + size,
            flags,
        )
        raw = head + data
        if csum:
            raw += struct.pack("<I", crc32(raw))
        self._f.write(raw)
        self.pos += size
        self._track(body)
        return self.dir / self._name(self.number), offset

    def _track(self, body: Any) -> None:
        if isinstance(body, Gtid) and not body.anonymous and body.sid:
            self.executed.add(body.sid, body.gno, body.tag or "")
        elif isinstance(body, MariaGtid):
            self.maria_state[body.domain_id] = (body.server_id, body.seq_no)

    def transaction(
        self, events: Iterable[tuple[int, Any, int]], encoded: list[bytes | None] | None = None
    ) -> tuple[Path, int]:
        """Write a whole transaction, then rotate if the file grew past its limit."""
        start: tuple[Path, int] | None = None
        last_ts = 0
        for i, (type_code, body, ts) in enumerate(events):
            where = self.event(type_code, body, ts, data=encoded[i] if encoded else None)
            start = start or where
            last_ts = ts
        self.maybe_rotate(last_ts)
        assert start is not None
        return start

    def maybe_rotate(self, timestamp: int) -> None:
        """Rotate if the file grew past its limit (call it only between transactions)."""
        if self.max_file_size is not None and self.pos >= self.max_file_size:
            self.rotate(timestamp)

    def rotate(self, timestamp: int) -> None:
        self.event(EventType.ROTATE, Rotate(4, self._name(self.number + 1)), timestamp)
        self._f.close()
        self._open(timestamp)

    def flush(self) -> None:
        """Make what was written durable (before a checkpoint that says it was written)."""
        if self._f is not None:
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self, timestamp: int = 0, stop: bool = True) -> list[Path]:
        if self._f is not None:
            if stop:
                self.event(EventType.STOP, Stop(), timestamp)
            self._f.close()
            self._f = None
        return self.files

    def __enter__(self) -> BinlogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["FLAVORS", "FLAG_BINLOG_IN_USE", "BinlogWriter", "Flavor"]
