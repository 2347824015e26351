"""One binlog dump, sans-I/O towards the client: the events to send, in order, as raw bytes; the
socket layer puts them in packets. What a MySQL/MariaDB dump thread sends, from the files:

- a fake ROTATE naming each file as the dump enters it (position 0, artificial flag);
- the file's FORMAT_DESCRIPTION first, with the in-use flag cleared; re-sent with log position 0
  when the dump starts inside the file;
- every event of the file byte for byte (checksums as written), from the requested position;
- at the end of the newest file: nothing yet (``Idle``, the caller waits and sends heartbeats) or,
  for a non-blocking dump, ``Finished`` (an EOF packet).

The newest file may still be written: only complete events are sent, a STOP its writer may still cut
off (``binlake merge`` continues its last file) is held back until a later file exists, and the
series is listed again at each end so new files are followed. A GTID dump leaves out the
transactions whose GTID the replica has (MySQL's rule: from a GTID event to the next GTID or
ROTATE)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from binlake.events.types import EventType
from binlake.gtid import GtidSet
from binlake.reader import FIRST_EVENT
from binlake.replication.packets import DUMP_NON_BLOCK, MARIA_DUMP_ANNOTATE_ROWS
from binlake.serve.directory import HEADER, BinlogDirectory, FileFormat
from binlake.serve.events import fake_rotate, format_event_for_dump, heartbeat
from binlake.sizes import max_payload

ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
MARIA_CAPABILITY_TOLERATE_HOLES = 2
_GTID_EVENTS = frozenset({EventType.GTID, EventType.GTID_TAGGED})


class DumpError(Exception):
    """The dump cannot go on; the client gets this as an ERR packet (MySQL's code 1236)."""

    def __init__(self, message: str, code: int = ER_MASTER_FATAL_ERROR_READING_BINLOG) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class DumpRequest:
    """What COM_BINLOG_DUMP or COM_BINLOG_DUMP_GTID asked for. An empty ``file`` means the first."""

    file: str
    position: int
    flags: int
    server_id: int
    gtids: GtidSet | None = None  # a GTID dump: the GTIDs the replica has

    @property
    def blocking(self) -> bool:
        return not self.flags & DUMP_NON_BLOCK


@dataclass(frozen=True, slots=True)
class Idle:
    """Nothing more yet: the dump waits for its files to grow."""


@dataclass(frozen=True, slots=True)
class Finished:
    """A non-blocking dump reached the end of the newest file."""


IDLE, FINISHED = Idle(), Finished()


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """What the replica said before the dump: ``checksum`` None when it never declared itself
    checksum-aware (``@master_binlog_checksum``), else whether it asked for CRC32;
    ``maria_capability`` from ``@mariadb_slave_capability``."""

    checksum: bool | None = None
    maria_capability: int = 0


class Dump:
    """Call ``next_events`` until it returns ``Finished`` (or for ever, blocking); ``file`` and
    ``position`` say where the replica is, for heartbeats."""

    def __init__(
        self,
        directory: BinlogDirectory,
        request: DumpRequest,
        client: ClientSettings,
        *,
        server_id: int,
    ) -> None:
        self.directory = directory
        self.request = request
        self.client = client
        self.server_id = server_id
        self.path = self._first_file()
        self.position = max(request.position, FIRST_EVENT) if request.gtids is None else FIRST_EVENT
        if request.gtids is None and request.position < FIRST_EVENT:
            raise DumpError(
                f"Client requested master to start replication from position {request.position} < 4"
            )
        self._fh: BinaryIO | None = None
        self._entered = False  # the fake ROTATE (and format event) of self.path are sent
        self._checksum = bool(client.checksum)  # CRC32 on the events we make up
        self._skipping = False  # inside a transaction the replica has (GTID dump)
        self._limit = max_payload()

    @property
    def file(self) -> str:
        return self.path.name

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def heartbeat(self) -> bytes:
        return heartbeat(self.file, self.position, server_id=self.server_id, checksum=self._checksum)

    # -- where to start --------------------------------------------------------------------

    def _first_file(self) -> Path:
        files = self.directory.files()
        if not files:
            raise DumpError("Binary log is not open: the served directory holds no binlog file yet")
        if self.request.gtids is not None:
            return self._first_file_for(self.request.gtids, files)
        if not self.request.file:
            return files[0]
        found = self.directory.find(self.request.file)
        if found is None:
            raise DumpError(
                f"Could not find first log file name in binary log index file ({self.request.file!r})"
            )
        return found

    def _first_file_for(self, gtids: GtidSet, files: list[Path]) -> Path:
        """MySQL's rule, the newest file whose PREVIOUS_GTIDS the replica has all of, except that an
        empty PREVIOUS_GTIDS says nothing of the anonymous transactions before it: the series is
        then read from its first file (what the replica has is left out either way)."""
        for f in reversed(files):
            before = self.directory.previous_gtids(f)
            if before and before.issubset(gtids):
                return f
        first = self.directory.previous_gtids(files[0])
        if first is None or first.issubset(gtids):
            return files[0]
        raise DumpError(
            "The slave is connecting using CHANGE MASTER TO MASTER_AUTO_POSITION = 1, but the master "
            "has purged binary logs containing GTIDs that the slave requires"
        )

    def _check_start(self, fmt: FileFormat) -> None:
        """The requested position must be an event start inside the file's complete events."""
        end, _ = self.directory.complete_end(self.path)
        target = self.position
        if target > end:
            size = os.path.getsize(self.path)
            raise DumpError(
                f"Client requested master to start replication from position > file size "
                f"({target} > {size} in {self.file})"
            )
        pos = FIRST_EVENT
        fh = self._open()
        while pos < target:
            fh.seek(pos)
            head = fh.read(HEADER)
            step = int.from_bytes(head[9:13], "little") if len(head) == HEADER else 0
            if step < HEADER:
                break
            if pos + step > target:
                raise DumpError(
                    f"position {target} in {self.file} is not the start of an event "
                    f"(the nearest are {pos} and {pos + step})"
                )
            pos += step
        if pos != target:
            raise DumpError(f"position {target} in {self.file} is not the start of an event")

    # -- the events ------------------------------------------------------------------------

    def _open(self) -> BinaryIO:
        if self._fh is None:
            self._fh = open(self.path, "rb")
        return self._fh

    def _enter(self) -> list[bytes] | None:
        """The fake ROTATE and, when starting inside the file, its format event (None: the file's
        format event is not written yet)."""
        fmt = self.directory.format_of(self.path)
        if fmt is None:
            return None
        out = [fake_rotate(self.file, self.position, server_id=self.server_id, checksum=self._checksum)]
        if self.position > FIRST_EVENT:
            self._check_start(fmt)
            out.append(self._format_event(fmt, resent=True))
        self._entered = True
        return out

    def _format_event(self, fmt: FileFormat, *, resent: bool) -> bytes:
        if fmt.checksum and self.client.checksum is None:
            raise DumpError(
                "Slave can not handle replication events with the checksum that master is configured "
                "to log (CRC32 in this file; set @master_binlog_checksum first)"
            )
        self._checksum = fmt.checksum
        has_crc = fmt.fde is not None and fmt.fde.checksum_alg is not None
        return format_event_for_dump(fmt.raw, resent=resent, has_crc=has_crc)

    def next_events(self, budget: int = 1 << 20) -> list[bytes] | Idle | Finished:
        """The next events (about ``budget`` bytes at most, one event at least), or what to do."""
        out: list[bytes] = []
        size = 0
        while size < budget:
            if not self._entered:
                first = self._enter()
                if first is None:
                    break
                out += first
                continue
            raw = self._read_event()
            if raw is None:
                if self._move_on():
                    continue
                break
            if self._send(raw):
                out.append(raw)
                size += len(raw)
        if out:
            return out
        return IDLE if self.request.blocking else FINISHED

    def _read_event(self) -> bytes | None:
        """The complete event at ``position`` (None at the end of what is written), position moved
        past it. A STOP ending the newest file is not read while that file may still grow."""
        fh = self._open()
        fh.seek(self.position)
        head = fh.read(HEADER)
        if len(head) < HEADER:
            return None
        length = int.from_bytes(head[9:13], "little")
        if length < HEADER or length > self._limit:
            raise DumpError(
                f"damaged event at {self.file}:{self.position}: length {length} "
                f"(binlog truncated in the middle of event, or corrupt)"
            )
        available = os.fstat(fh.fileno()).st_size - self.position
        if length > available:
            return None
        if (
            head[4] == EventType.STOP
            and length == available
            and self.request.blocking
            and self.directory.after(self.path) is None
        ):
            return None
        raw = head + fh.read(length - HEADER)
        if len(raw) < length:  # cut while read
            return None
        self.position += length
        if self.position == FIRST_EVENT + length and raw[4] in (
            EventType.FORMAT_DESCRIPTION,
            EventType.START_V3,
        ):
            fmt = self.directory.format_of(self.path)
            if fmt is not None and raw == fmt.raw:
                raw = self._format_event(fmt, resent=False)
        return raw

    def _move_on(self) -> bool:
        """At the end of the written events: go to the next file if there is one. A file replaced
        under the dump (a new inode) is opened again at the same position."""
        if self._fh is not None and os.stat(self.path).st_ino != os.fstat(self._fh.fileno()).st_ino:
            self.close()
        size = os.path.getsize(self.path)
        if size < self.position:
            raise DumpError(
                f"{self.file} was cut back to {size} bytes, before the dump's position {self.position} "
                "(its writer restarted): reconnect from the last complete transaction"
            )
        nxt = self.directory.after(self.path)
        if nxt is None:
            return False
        fh = self._open()
        fh.seek(self.position)
        if fh.read(1):
            raise DumpError(
                f"binlog truncated in the middle of event: {self.file} ends inside an event at "
                f"{self.position}, and {nxt.name} follows it"
            )
        self.close()
        self.path, self.position, self._entered = nxt, FIRST_EVENT, False
        return True

    def _send(self, raw: bytes) -> bool:
        """Whether the replica gets this file event (MariaDB annotations it did not ask for and
        transactions it has are left out)."""
        code = raw[4]
        if (
            code == EventType.MARIA_ANNOTATE_ROWS
            and not self.request.flags & MARIA_DUMP_ANNOTATE_ROWS
            and self.client.maria_capability >= MARIA_CAPABILITY_TOLERATE_HOLES
        ):
            return False
        gtids = self.request.gtids
        if gtids is None:
            return True
        if code in _GTID_EVENTS:
            self._skipping = _has_gtid(gtids, raw, code)
        elif code in (EventType.ANONYMOUS_GTID, EventType.ROTATE):
            self._skipping = False
        return not self._skipping


def _has_gtid(gtids: GtidSet, raw: bytes, code: int) -> bool:
    """Whether the GTID event ``raw`` names a GTID in ``gtids`` (untagged: flags, sid, gno)."""
    if code != EventType.GTID or len(raw) < HEADER + 25:
        return False  # a tagged GTID: sent (MySQL 8.4 replicas do not ask this server)
    from binlake.events.gtid import format_uuid

    sid = format_uuid(raw[HEADER + 1 : HEADER + 17])
    gno = int.from_bytes(raw[HEADER + 17 : HEADER + 25], "little")
    return gtids.contains(sid, gno)
