"""GTID events: MySQL GTID / ANONYMOUS_GTID / GTID_TAGGED, PREVIOUS_GTIDS (plain and tagged), and
MariaDB GTID / GTID_LIST / BINLOG_CHECKPOINT."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from binlake.events.base import DecodeState, EventHeader
from binlake.events.types import EventType
from binlake.wire import Cursor, ShortRead

UNDEFINED_SERVER_VERSION = 999999


def format_uuid(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw))


@dataclass(slots=True)
class Gtid:
    """A MySQL GTID event (anonymous when ``anonymous``); fields absent in older servers stay None."""

    flags: int
    sid: str
    gno: int
    anonymous: bool = False
    tag: str | None = None
    last_committed: int | None = None
    sequence_number: int | None = None
    immediate_commit_timestamp: int | None = None  # microseconds since the epoch, UTC
    original_commit_timestamp: int | None = None
    transaction_length: int | None = None
    immediate_server_version: int | None = None
    original_server_version: int | None = None
    commit_group_ticket: int | None = None

    @property
    def gtid(self) -> str | None:
        if self.anonymous:
            return None
        return f"{self.sid}:{self.tag}:{self.gno}" if self.tag else f"{self.sid}:{self.gno}"


def read_net_field_length(c: Cursor) -> int:
    v = c.lenenc()
    if v is None:
        raise ShortRead("NULL where a packed integer is expected")
    return v


def decode_gtid(buf: bytes, state: DecodeState, header: EventHeader) -> Gtid:
    c = Cursor(buf)
    ev = Gtid(
        flags=c.u8(),
        sid=format_uuid(c.take(16)),
        gno=c.u64(),
        anonymous=header.type_code == EventType.ANONYMOUS_GTID,
    )
    if c.remaining and c.buf[c.pos] == 2:  # logical-clock typecode (MySQL 5.7.5+)
        c.skip(1)
        ev.last_committed = c.u64()
        ev.sequence_number = c.u64()
        if c.remaining >= 7:
            ts = c.uint(7)
            if ts & (1 << 55):
                ev.immediate_commit_timestamp = ts & ~(1 << 55)
                ev.original_commit_timestamp = c.uint(7)
            else:
                ev.immediate_commit_timestamp = ev.original_commit_timestamp = ts
        if c.remaining:
            ev.transaction_length = read_net_field_length(c)
        if c.remaining >= 4:
            v = c.u32()
            if v & (1 << 31):
                ev.immediate_server_version = v & ~(1 << 31)
                ev.original_server_version = c.u32()
            else:
                ev.immediate_server_version = ev.original_server_version = v
        if c.remaining >= 8:
            ev.commit_group_ticket = c.u64()
    return ev


def read_varlen_uint(c: Cursor) -> int:
    """MySQL serialization library integer: trailing 1-bits of the first byte give the extra bytes."""
    first = c.u8()
    if first == 0xFF:
        return c.u64()
    n = 0
    while first >> n & 1:
        n += 1
    c.pos -= 1
    return c.uint(n + 1) >> (n + 1)


def read_varlen_int(c: Cursor) -> int:
    u = read_varlen_uint(c)
    return -(u >> 1) - 1 if u & 1 else u >> 1


def decode_gtid_tagged(buf: bytes, state: DecodeState, header: EventHeader) -> Gtid:
    """GTID_TAGGED_LOG_EVENT (MySQL 8.3+): a serialization-library message of numbered fields."""
    c = Cursor(buf)
    version = c.u8()
    if version != 2:
        raise ValueError(f"unsupported tagged GTID serialization version {version}")
    start = 0
    size = read_varlen_uint(c)
    last_non_ignorable = read_varlen_uint(c)
    end = start + size
    if end > len(buf) or end < c.pos:
        raise ShortRead(f"tagged GTID payload size {size} does not fit the event")
    body = Cursor(buf, c.pos, end)
    ev = Gtid(flags=0, sid="", gno=0)
    seen_original_ts = seen_original_ver = False
    while body.remaining:
        fid = read_varlen_uint(body)
        if fid == 0:
            ev.flags = read_varlen_uint(body)
        elif fid == 1:
            ev.sid = format_uuid(bytes(read_varlen_uint(body) & 0xFF for _ in range(16)))
        elif fid == 2:
            ev.gno = read_varlen_int(body)
        elif fid == 3:
            ev.tag = body.take(read_varlen_uint(body)).decode("utf-8", "surrogateescape")
        elif fid == 4:
            ev.last_committed = read_varlen_int(body)
        elif fid == 5:
            ev.sequence_number = read_varlen_int(body)
        elif fid == 6:
            ev.immediate_commit_timestamp = read_varlen_uint(body)
        elif fid == 7:
            ev.original_commit_timestamp = read_varlen_uint(body)
            seen_original_ts = True
        elif fid == 8:
            ev.transaction_length = read_varlen_uint(body)
        elif fid == 9:
            ev.immediate_server_version = read_varlen_uint(body)
        elif fid == 10:
            ev.original_server_version = read_varlen_uint(body)
            seen_original_ver = True
        elif fid == 11:
            ev.commit_group_ticket = read_varlen_uint(body)
        elif fid <= last_non_ignorable:
            raise ValueError(f"unknown non-ignorable field {fid} in tagged GTID")
        else:
            break  # an ignorable field of a newer server: its length is unknown, stop here
    if not seen_original_ts:
        ev.original_commit_timestamp = ev.immediate_commit_timestamp
    if not seen_original_ver:
        ev.original_server_version = ev.immediate_server_version
    return ev


@dataclass(slots=True)
class PreviousGtids:
    """The GTID set executed before this file: {(uuid, tag or ''): [(start, end_inclusive), …]}."""

    sets: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)

    def __str__(self) -> str:
        parts = []
        for (sid, tag), ivs in self.sets.items():
            head = f"{sid}:{tag}" if tag else sid
            parts.append(head + "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in ivs))
        return ",\n".join(parts)


def decode_previous_gtids(buf: bytes, state: DecodeState, header: EventHeader) -> PreviousGtids:
    c = Cursor(buf)
    head = c.u64()
    tagged = head >> 56 == 1
    n_sids = (head >> 8) & ((1 << 48) - 1) if tagged else head & ((1 << 56) - 1)
    if n_sids * 24 > c.remaining:
        raise ShortRead(f"{n_sids} GTID sources do not fit in {c.remaining} bytes")
    out = PreviousGtids()
    for _ in range(n_sids):
        sid = format_uuid(c.take(16))
        tag = c.take(read_varlen_uint(c)).decode("utf-8", "surrogateescape") if tagged else ""
        n = c.u64()
        if n * 16 > c.remaining:
            raise ShortRead(f"{n} GTID intervals do not fit in {c.remaining} bytes")
        # On the wire intervals are [start, end): store them inclusive, as people write them.
        out.sets.setdefault((sid, tag), []).extend((c.u64(), c.u64() - 1) for _ in range(n))
    return out


MARIA_FL_STANDALONE = 1
MARIA_FL_GROUP_COMMIT_ID = 2
MARIA_FL_TRANSACTIONAL = 4
MARIA_FL_ALLOW_PARALLEL = 8
MARIA_FL_WAITED = 16
MARIA_FL_DDL = 32
MARIA_FL_PREPARED_XA = 64
MARIA_FL_COMPLETED_XA = 128


@dataclass(slots=True)
class MariaGtid:
    seq_no: int
    domain_id: int
    server_id: int
    flags: int
    commit_id: int | None = None
    xa_format_id: int | None = None
    xa_gtrid: bytes | None = None
    xa_bqual: bytes | None = None
    flags_extra: int | None = None
    extra: bytes = b""

    @property
    def gtid(self) -> str:
        return f"{self.domain_id}-{self.server_id}-{self.seq_no}"

    @property
    def standalone(self) -> bool:
        return bool(self.flags & MARIA_FL_STANDALONE)


def decode_maria_gtid(buf: bytes, state: DecodeState, header: EventHeader) -> MariaGtid:
    c = Cursor(buf)
    ev = MariaGtid(seq_no=c.u64(), domain_id=c.u32(), server_id=header.server_id, flags=c.u8())
    if ev.flags & MARIA_FL_GROUP_COMMIT_ID:
        ev.commit_id = c.u64()
    elif ev.flags & (MARIA_FL_PREPARED_XA | MARIA_FL_COMPLETED_XA):
        ev.xa_format_id = c.u32()
        glen, blen = c.u8(), c.u8()
        ev.xa_gtrid, ev.xa_bqual = c.take(glen), c.take(blen)
    else:
        c.skip(min(6, c.remaining))  # reserved zeros
    if c.remaining:
        ev.flags_extra = c.u8()
        ev.extra = c.rest()
    return ev


@dataclass(slots=True)
class MariaGtidList:
    flags: int
    gtids: list[tuple[int, int, int]]  # (domain_id, server_id, seq_no)

    def __str__(self) -> str:
        return ",".join(f"{d}-{s}-{n}" for d, s, n in self.gtids)


def decode_maria_gtid_list(buf: bytes, state: DecodeState, header: EventHeader) -> MariaGtidList:
    c = Cursor(buf)
    word = c.u32()
    count, flags = word & 0x0FFFFFFF, word >> 28
    if count * 16 > c.remaining:
        raise ShortRead(f"{count} GTIDs do not fit in {c.remaining} bytes")
    return MariaGtidList(flags, [(c.u32(), c.u32(), c.u64()) for _ in range(count)])


@dataclass(slots=True)
class MariaBinlogCheckpoint:
    file: str


def decode_maria_checkpoint(buf: bytes, state: DecodeState, header: EventHeader) -> MariaBinlogCheckpoint:
    c = Cursor(buf)
    return MariaBinlogCheckpoint(c.take(c.u32()).decode("utf-8", "surrogateescape"))
