"""GTID events: MySQL GTID / ANONYMOUS_GTID / GTID_TAGGED, PREVIOUS_GTIDS (plain and tagged), and
MariaDB GTID / GTID_LIST / BINLOG_CHECKPOINT."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from binlake.events.base import DecodeState, EventHeader
from binlake.events.types import EventType
from binlake.wire import Cursor, ShortRead

UNDEFINED_SERVER_VERSION = 999999


_UUID_TEXT: dict[bytes, str] = {}  # a server writes the same source id in every GTID event


def _uuid_text(raw: bytes) -> str:
    """``str(uuid.UUID(bytes=raw))``: 8-4-4-4-12 lowercase hex digits (uuid, which imports
    platform and hashlib, only for the error of a length other than 16)."""
    if len(raw) != 16:
        import uuid

        return str(uuid.UUID(bytes=raw))
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def format_uuid(raw: bytes) -> str:
    text = _UUID_TEXT.get(raw)
    if text is None:
        if len(_UUID_TEXT) >= 1024:
            _UUID_TEXT.clear()
        text = _UUID_TEXT[raw] = _uuid_text(raw)
    return text


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
    tagged_fields: tuple[int, ...] = ()  # GTID_TAGGED: the field ids in the order written
    tagged_last_non_ignorable: int = 0

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


# flags, sid, gno, the logical-clock typecode, last_committed, sequence_number (MySQL 5.7.5+)
_GTID_CLOCK = struct.Struct("<B16sQBQQ")


def decode_gtid(buf: bytes, state: DecodeState, header: EventHeader) -> Gtid:
    anonymous = header.type_code == EventType.ANONYMOUS_GTID
    if len(buf) >= _GTID_CLOCK.size and buf[25] == 2:  # one read of the fixed part (the common case)
        flags, sid, gno, _, last_committed, sequence_number = _GTID_CLOCK.unpack_from(buf)
        ev = Gtid(flags, format_uuid(sid), gno, anonymous, None, last_committed, sequence_number)
        c = Cursor(buf, _GTID_CLOCK.size)
    else:
        c = Cursor(buf)
        ev = Gtid(flags=c.u8(), sid=format_uuid(c.take(16)), gno=c.u64(), anonymous=anonymous)
        if not (c.remaining and c.buf[c.pos] == 2):  # no logical clock (before MySQL 5.7.5)
            return ev
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
    ev = Gtid(flags=0, sid="", gno=0, tagged_last_non_ignorable=last_non_ignorable)
    seen_original_ts = seen_original_ver = False
    order: list[int] = []
    while body.remaining:
        fid = read_varlen_uint(body)
        order.append(fid)
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
    ev.tagged_fields = tuple(order)
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
    tail: bytes = b""  # bytes some servers write after the list

    def __str__(self) -> str:
        return ",".join(f"{d}-{s}-{n}" for d, s, n in self.gtids)


def decode_maria_gtid_list(buf: bytes, state: DecodeState, header: EventHeader) -> MariaGtidList:
    c = Cursor(buf)
    word = c.u32()
    count, flags = word & 0x0FFFFFFF, word >> 28
    if count * 16 > c.remaining:
        raise ShortRead(f"{count} GTIDs do not fit in {c.remaining} bytes")
    gtids = [(c.u32(), c.u32(), c.u64()) for _ in range(count)]
    return MariaGtidList(flags, gtids, c.rest())


@dataclass(slots=True)
class MariaBinlogCheckpoint:
    file: str


def decode_maria_checkpoint(buf: bytes, state: DecodeState, header: EventHeader) -> MariaBinlogCheckpoint:
    c = Cursor(buf)
    return MariaBinlogCheckpoint(c.take(c.u32()).decode("utf-8", "surrogateescape"))


# ---- encoders -----------------------------------------------------------------------------------


def encode_lenenc(n: int) -> bytes:
    from binlake.wire import encode_lenenc as enc

    return enc(n)


def encode_gtid(b: Gtid) -> bytes:
    import uuid  # the writer's side: not imported by a command that only reads

    out = bytes([b.flags]) + (uuid.UUID(b.sid).bytes if b.sid else b"\0" * 16) + b.gno.to_bytes(8, "little")
    if b.last_committed is None:
        return out
    out += b"\x02" + b.last_committed.to_bytes(8, "little") + (b.sequence_number or 0).to_bytes(8, "little")
    if b.immediate_commit_timestamp is None:
        return out
    if (
        b.original_commit_timestamp is not None
        and b.original_commit_timestamp != b.immediate_commit_timestamp
    ):
        out += (b.immediate_commit_timestamp | 1 << 55).to_bytes(
            7, "little"
        ) + b.original_commit_timestamp.to_bytes(7, "little")
    else:
        out += b.immediate_commit_timestamp.to_bytes(7, "little")
    if b.transaction_length is None:
        return out
    out += encode_lenenc(b.transaction_length)
    if b.immediate_server_version is None:
        return out
    if b.original_server_version is not None and b.original_server_version != b.immediate_server_version:
        out += (b.immediate_server_version | 1 << 31).to_bytes(
            4, "little"
        ) + b.original_server_version.to_bytes(4, "little")
    else:
        out += b.immediate_server_version.to_bytes(4, "little")
    if b.commit_group_ticket is not None:
        out += b.commit_group_ticket.to_bytes(8, "little")
    return out


def encode_previous_gtids(b: PreviousGtids) -> bytes:
    import uuid  # the writer's side: not imported by a command that only reads

    tagged = any(tag for _, tag in b.sets)
    n = len(b.sets)
    out = bytearray(((1 << 56) | (n << 8) | 1).to_bytes(8, "little") if tagged else n.to_bytes(8, "little"))
    for (sid, tag), ivs in b.sets.items():
        out += uuid.UUID(sid).bytes
        if tagged:
            raw = tag.encode()
            out += _varlen_uint(len(raw)) + raw
        out += len(ivs).to_bytes(8, "little")
        for a, e in ivs:
            out += a.to_bytes(8, "little") + (e + 1).to_bytes(8, "little")
    return bytes(out)


def _varlen_uint(n: int) -> bytes:
    """MySQL serialization library integer (see ``read_varlen_uint``)."""
    for k in range(1, 9):
        if n < 1 << (7 * k):
            return ((n << k) | ((1 << (k - 1)) - 1)).to_bytes(k, "little")
    return b"\xff" + n.to_bytes(8, "little")


def encode_maria_gtid(b: MariaGtid) -> bytes:
    out = struct.pack("<QIB", b.seq_no, b.domain_id, b.flags)
    if b.commit_id is not None:
        out += struct.pack("<Q", b.commit_id)
    elif b.xa_format_id is not None:
        gt, bq = b.xa_gtrid or b"", b.xa_bqual or b""
        out += struct.pack("<IBB", b.xa_format_id, len(gt), len(bq)) + gt + bq
    else:
        out += b"\0" * 6
    if b.flags_extra is not None:
        out += bytes([b.flags_extra]) + b.extra
    return out


def encode_maria_gtid_list(b: MariaGtidList) -> bytes:
    out = struct.pack("<I", len(b.gtids) | (b.flags << 28))
    return out + b"".join(struct.pack("<IIQ", d, s, n) for d, s, n in b.gtids) + b.tail


def encode_maria_checkpoint(b: MariaBinlogCheckpoint) -> bytes:
    raw = b.file.encode("utf-8", "surrogateescape")
    return struct.pack("<I", len(raw)) + raw


def _varlen_int(n: int) -> bytes:
    return _varlen_uint(n << 1 if n >= 0 else ((-(n + 1)) << 1) | 1)


def encode_gtid_tagged(b: Gtid) -> bytes:
    """GTID_TAGGED_LOG_EVENT: serialization format v2, fields in the order they were written."""
    import uuid  # the writer's side: not imported by a command that only reads

    writers = {
        0: lambda: _varlen_uint(b.flags),
        1: lambda: b"".join(_varlen_uint(x) for x in uuid.UUID(b.sid).bytes),
        2: lambda: _varlen_int(b.gno),
        3: lambda: _varlen_uint(len((b.tag or "").encode())) + (b.tag or "").encode(),
        4: lambda: _varlen_int(b.last_committed or 0),
        5: lambda: _varlen_int(b.sequence_number or 0),
        6: lambda: _varlen_uint(b.immediate_commit_timestamp or 0),
        7: lambda: _varlen_uint(b.original_commit_timestamp or 0),
        8: lambda: _varlen_uint(b.transaction_length or 0),
        9: lambda: _varlen_uint(b.immediate_server_version or 0),
        10: lambda: _varlen_uint(b.original_server_version or 0),
        11: lambda: _varlen_uint(b.commit_group_ticket or 0),
    }
    order = b.tagged_fields or tuple(range(12))
    fields = b"".join(_varlen_uint(f) + writers[f]() for f in order)
    head = _varlen_uint(b.tagged_last_non_ignorable)
    size = 1 + len(head) + len(fields)
    for _ in range(3):  # the size counts its own encoding
        total = size + len(_varlen_uint(size))
        if total == size + len(_varlen_uint(total)):
            size = total
            break
        size = total - len(_varlen_uint(size)) + len(_varlen_uint(total))
    return b"\x02" + _varlen_uint(size) + head + fields
