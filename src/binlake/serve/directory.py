"""The served binlog files: a directory (its index or numbered files) listed again on every look,
so files a writer adds are seen; each file's format event (checksum, server version) and where its
complete events end, read from headers only and remembered as the file grows."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from binlake.decoder import EventDecoder
from binlake.errors import BinlogError
from binlake.events.base import FormatDescription
from binlake.events.gtid import Gtid, PreviousGtids
from binlake.events.types import EventType
from binlake.gtid import GtidAccumulator, GtidSet
from binlake.reader import BINLOG_MAGIC, FIRST_EVENT
from binlake.series import BinlogSeries, SeriesError

HEADER = 19
CRC32 = 1


@dataclass(frozen=True, slots=True)
class FileFormat:
    """What a file's first event says: its raw bytes (re-sent by a dump starting inside the file)
    and its layout; ``fde`` is None for a file without a format event (read as v4 events)."""

    raw: bytes
    fde: FormatDescription | None

    @property
    def checksum(self) -> bool:
        """Events carry a CRC32."""
        return self.fde is not None and self.fde.checksum_alg == CRC32

    @property
    def checksum_name(self) -> str:
        return "CRC32" if self.checksum else "NONE"


@dataclass
class _Walk:
    """How far the headers of a file have been walked: the end of its last complete event."""

    end: int = FIRST_EVENT
    last_type: int = 0


@dataclass
class BinlogDirectory:
    """The files of ``path`` (a directory or an index file) in binlog order, by name."""

    path: str
    _formats: dict[Path, FileFormat] = field(default_factory=dict, repr=False)
    _walks: dict[Path, _Walk] = field(default_factory=dict, repr=False)
    _executed: tuple[Path, int, GtidSet | None] | None = field(default=None, repr=False)

    def files(self) -> list[Path]:
        """The series as it is now: [] while the directory holds no binlog yet."""
        try:
            return BinlogSeries.open(self.path).files
        except SeriesError as e:
            if "no binlog files" in str(e):
                return []
            raise

    def find(self, name: str) -> Path | None:
        """The file a replica names (its base name; a path a server's index holds works too)."""
        base = name.rsplit("/", 1)[-1]
        return next((f for f in self.files() if f.name == base), None)

    def after(self, path: Path) -> Path | None:
        """The file following ``path`` in the series, once a writer has added it."""
        files = self.files()
        names = [f.name for f in files]
        if path.name not in names:
            return None
        i = names.index(path.name)
        return files[i + 1] if i + 1 < len(files) else None

    def format_of(self, path: Path) -> FileFormat | None:
        """The file's first event, once it is written whole (None before)."""
        known = self._formats.get(path)
        if known is not None:
            return known
        with open(path, "rb") as f:
            head = f.read(FIRST_EVENT + HEADER)
            if len(head) < FIRST_EVENT + HEADER:
                if not BINLOG_MAGIC.startswith(head[:4]):
                    raise BinlogError(f"not a binlog file: starts with {head[:4]!r}", source=str(path))
                return None
            if head[:4] != BINLOG_MAGIC:
                raise BinlogError(f"not a binlog file: starts with {head[:4]!r}", source=str(path))
            size = int.from_bytes(head[FIRST_EVENT + 9 : FIRST_EVENT + 13], "little")
            if size < HEADER or size > 1 << 20:
                raise BinlogError(f"first event of {size} bytes is not a format event", source=str(path))
            raw = head[FIRST_EVENT:] + f.read(size - HEADER)
        if len(raw) < size:
            return None
        fde = None
        if raw[4] == EventType.FORMAT_DESCRIPTION:
            body = EventDecoder(str(path), verify_checksum=False).decode_event(raw, FIRST_EVENT).body
            fde = body if isinstance(body, FormatDescription) else None
        self._formats[path] = known = FileFormat(raw, fde)
        return known

    def complete_end(self, path: Path) -> tuple[int, int]:
        """(where the file's last complete event ends, that event's type); walks only the headers
        added since the last look. A file cut shorter than what was walked is walked again."""
        walk = self._walks.setdefault(path, _Walk())
        size = os.path.getsize(path)
        if size < walk.end:
            walk = self._walks[path] = _Walk()
        with open(path, "rb") as f:
            pos = walk.end
            while pos + HEADER <= size:
                f.seek(pos)
                head = f.read(HEADER)
                length = int.from_bytes(head[9:13], "little")
                if len(head) < HEADER or length < HEADER or pos + length > size:
                    break
                pos += length
                walk.end, walk.last_type = pos, head[4]
        return walk.end, walk.last_type

    def previous_gtids(self, path: Path) -> GtidSet | None:
        """The GTIDs executed before the file (its PREVIOUS_GTIDS event), None when it has none."""
        from binlake.reader import BinlogReader

        try:
            for i, ev in enumerate(BinlogReader(path, verify_checksum=False, decode_rows=False)):
                if isinstance(ev.body, PreviousGtids):
                    return GtidSet.from_dict(
                        {key: [(a, b) for a, b in ivs] for key, ivs in ev.body.sets.items()}
                    )
                if i >= 3:
                    return None
        except BinlogError:
            return None
        return None

    def executed_gtids(self) -> GtidSet | None:
        """The MySQL GTIDs in the series (the newest file's PREVIOUS_GTIDS and its GTID events, up to
        its last complete event): what a server reports as ``gtid_executed``. None: a series
        without GTIDs (anonymous, MariaDB or older). Read again only when the newest file grew."""
        from binlake.reader import BinlogReader

        files = self.files()
        if not files:
            return None
        newest = files[-1]
        end = self.complete_end(newest)[0]
        if self._executed is not None and self._executed[:2] == (newest, end):
            return self._executed[2]
        before = self.previous_gtids(newest)
        acc, seen = GtidAccumulator(before), bool(before)
        try:
            for ev in BinlogReader(newest, verify_checksum=False, decode_rows=False, stop_position=end):
                b = ev.body
                if isinstance(b, Gtid) and not b.anonymous and b.sid:
                    acc.add(b.sid, b.gno, b.tag or "")
                    seen = True
        except BinlogError:
            pass  # a file cut by its writer: what is complete counts
        executed = acc.freeze() if seen else None
        self._executed = (newest, end, executed)
        return executed

    def status(self) -> tuple[str, int] | None:
        """The newest file and where its complete events end (SHOW MASTER STATUS)."""
        files = self.files()
        if not files:
            return None
        return files[-1].name, self.complete_end(files[-1])[0]

    def newest_format(self) -> FileFormat | None:
        """The format of the newest file that has one: what the served "server" writes now."""
        for f in reversed(self.files()):
            fmt = self.format_of(f)
            if fmt is not None:
                return fmt
        return None
