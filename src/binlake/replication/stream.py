"""A replication stream, sans-I/O: the payloads of a binlog dump in, decoded events out, with the
server file and position of each and the last point a replica can safely resume from.

Every payload of a dump is an OK byte and one event, an ERR packet, or (non-blocking dumps) EOF.
Besides the events of its binlog files the server sends events of its own: a fake ROTATE naming the
file (artificial flag, position 0), the file's FORMAT_DESCRIPTION again when the dump starts inside a
file, heartbeats while idle. ``StreamEvent.in_file`` tells them apart, so a mirror writes exactly the
server's bytes and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from binlake.decoder import EventDecoder
from binlake.errors import ReplicationError
from binlake.events.base import Event
from binlake.events.control import Rotate
from binlake.events.types import FLAG_ARTIFICIAL, EventType
from binlake.gtid import GtidAccumulator, GtidSet, MariaGtidPos, parse_gtid
from binlake.replication.packets import EOF, ERR, OK, STREAM_ONLY_EVENTS, is_eof, parse_err
from binlake.txn import UNFINISHED, Transaction, TransactionGrouper

_NUMBER = re.compile(r"\.(\d+)$")


def file_number(name: str) -> int:
    """The sequence number a server gives its binlog file (``mariadb-bin.000042`` → 42)."""
    m = _NUMBER.search(name)
    return int(m.group(1)) if m else 0


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a replica continues after the last complete transaction it received."""

    file: str
    position: int
    gtids: GtidSet | None = None  # MySQL: every GTID received so far (with the start set)
    maria_gtids: MariaGtidPos | None = None  # MariaDB: the last GTID per domain

    def __str__(self) -> str:
        gt = self.maria_gtids if self.maria_gtids is not None else self.gtids
        return f"{self.file}:{self.position}" + (f" (GTIDs {gt})" if gt else "")


@dataclass(slots=True)
class StreamEvent:
    """One event as the server sent it. ``events`` is the decoded event, then any events packed inside
    it (a compressed transaction). ``in_file``: these bytes sit at ``file``:``start`` in the server's
    binlog, so a mirror writes them; otherwise the server made them up for the stream."""

    raw: bytes
    events: list[Event]
    file: str
    start: int
    end: int
    in_file: bool

    @property
    def event(self) -> Event:
        return self.events[0]


@dataclass(slots=True)
class EndOfStream:
    """A non-blocking dump reached the end of the server's binlogs."""

    file: str
    position: int


@dataclass
class ReplicationStream:
    """Feed each dump payload to ``receive``; it returns what the payload carried.

    ``resume`` is the last point with no transaction open: reconnecting there loses nothing and
    repeats nothing. ``transactions`` collects transactions as they complete (``keep_events`` keeps
    their events, for consumers that take whole transactions).
    """

    file: str = ""
    position: int = 4
    server: str = "<server>"
    verify_checksum: bool = True
    keep_events: bool = False
    decode_rows: bool = True  # False: rows events keep their bytes (a pass that wants statements only)
    exact: bool = False  # a file/position dump: every event of the file follows the previous one
    gtids: GtidSet | None = None
    maria_gtids: MariaGtidPos | None = None
    decoder: EventDecoder = field(init=False)
    resume: ResumePoint = field(init=False)
    finished: list[Transaction] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.decoder = EventDecoder(
            self.file or self.server, verify_checksum=self.verify_checksum, decode_rows=self.decode_rows
        )
        self._grouper = TransactionGrouper(keep_events=self.keep_events)
        self._acc = GtidAccumulator(self.gtids) if self.gtids is not None else None
        self.resume = ResumePoint(self.file, self.position, self.gtids, self.maria_gtids)
        self._file_seq = file_number(self.file)

    def receive(self, payload: bytes) -> StreamEvent | EndOfStream:
        if not payload:
            raise ReplicationError("empty packet in a binlog dump", source=self.server, offset=self.position)
        head = payload[0]
        if head == OK:
            return self._event(payload[1:])
        if head == ERR:
            err = parse_err(payload)
            raise ReplicationError(
                f"{err} (at {self.file}:{self.position})",
                code=err.code,
                source=self.server,
                offset=self.position,
            )
        if head == EOF and is_eof(payload):
            return EndOfStream(self.file, self.position)
        raise ReplicationError(
            f"unexpected packet 0x{head:02x} in a binlog dump", source=self.server, offset=self.position
        )

    def _event(self, raw: bytes) -> StreamEvent:
        header = self.decoder.parse_header(raw, self.position)
        artificial = bool(header.flags & FLAG_ARTIFICIAL) or header.log_pos == 0
        start = header.log_pos - header.event_size if header.log_pos else self.position
        ours = not artificial and header.type_code not in STREAM_ONLY_EVENTS
        if (
            ours
            and self.exact
            and start != self.position
            and header.type_code != EventType.FORMAT_DESCRIPTION
        ):
            raise ReplicationError(
                f"the server sent an event ending at {header.log_pos} with {header.event_size} bytes where "
                f"{self.file}:{self.position} was expected: is {self.position} an event boundary?",
                source=self.server,
                offset=self.position,
            )
        in_file = ours and start >= self.position
        events = list(self.decoder.decode(raw, start if in_file else 0, header))
        first = events[0]
        item = StreamEvent(raw, events, self.file, start, header.log_pos, in_file)
        if isinstance(first.body, Rotate):
            self._rotate(first.body)
            return item
        if not in_file:
            return item
        self.position = header.log_pos
        seq = self._file_seq
        for ev in events:
            for t in self._grouper.feed(seq, ev):
                self._finished(t)
        if self._grouper.current is None and not self._grouper.pending:
            self.resume = ResumePoint(
                self.file,
                self.position,
                self._acc.freeze() if self._acc is not None else None,
                self.maria_gtids,
            )
        return item

    def _rotate(self, rot: Rotate) -> None:
        if self._grouper.current is not None:  # a transaction never spans files: it was cut off
            self._grouper.finish()
        self.file, self.position = rot.next_file, rot.position
        self._file_seq = file_number(self.file)
        self.decoder.source = rot.next_file
        self.resume = ResumePoint(self.file, self.position, self.resume.gtids, self.resume.maria_gtids)

    def _finished(self, t: Transaction) -> None:
        if t.kind == UNFINISHED:
            return
        if t.gtid and self._acc is not None and not t.anonymous:
            sid, tag, gno = parse_gtid(t.gtid)
            self._acc.add(sid, gno, tag)
        elif t.gtid and self.maria_gtids is not None and t.gtid.count("-") == 2:
            d, s, n = (int(x) for x in t.gtid.split("-"))
            self.maria_gtids = self.maria_gtids.advance(d, s, n)
        self.finished.append(t)

    def take_transactions(self) -> list[Transaction]:
        out, self.finished = self.finished, []
        return out
