"""Control events: format description, rotate, stop, xid, intvar, rand, user variables, incidents,
heartbeats, rows-query, XA prepare, and the LOAD DATA family of old servers."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from binlake.events.base import DecodeState, EventHeader, FormatDescription
from binlake.wire import Cursor

_VERSION = re.compile(rb"^(\d+)\.(\d+)\.(\d+)")


def server_version_tuple(version: str) -> tuple[int, int, int]:
    m = _VERSION.match(version.encode())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)


def has_checksum_alg(version: str) -> bool:
    """Servers from MySQL 5.6.1 and MariaDB 5.3.0 on end the FDE with a checksum-algorithm byte."""
    split = (5, 3, 0) if "mariadb" in version.lower() else (5, 6, 1)
    return server_version_tuple(version) >= split


# Pre-release 5.1/5.2 trees ("5.1.x-a_drop5p…", "5.2.x-a_drop6p…") numbered the events after
# FORMAT_DESCRIPTION differently: their code i means our PERMUTATION[i].
_A_DROP_PERMUTATION = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 19, 20, 21, 22, 16, 17, 18)


def _uses_a_drop_numbering(version: str, n_types: int) -> bool:
    v = version.encode()
    if n_types != 22 or len(v) < 13:
        return False
    return (v[:4] == b"5.1." and b"1"[0] <= v[4] <= b"5"[0] and v[12:13] == b"5") or (
        v[:4] == b"5.2." and b"0"[0] <= v[4] <= b"2"[0] and v[12:13] == b"6"
    )


def decode_format_description(buf: bytes, state: DecodeState, header: EventHeader) -> FormatDescription:
    c = Cursor(buf)
    binlog_version = c.u16()
    server_version = c.take(50).split(b"\0", 1)[0].decode("latin-1")
    create_timestamp = c.u32()
    header_length = c.u8()
    rest = c.rest()
    alg: int | None = None
    if has_checksum_alg(server_version) and len(rest) >= 5:
        alg = rest[-5]
        rest = rest[:-5]
    permutation = None
    if _uses_a_drop_numbering(server_version, len(rest)):
        permutation = _A_DROP_PERMUTATION
        lengths = bytearray(len(rest))
        for old in range(1, len(rest) + 1):
            lengths[permutation[old] - 1] = rest[old - 1]
        rest = bytes(lengths)
    return FormatDescription(
        event_type_permutation=permutation,
        binlog_version=binlog_version,
        server_version=server_version,
        create_timestamp=create_timestamp,
        header_length=header_length,
        post_header_lengths=rest,
        checksum_alg=alg,
        is_mariadb="mariadb" in server_version.lower(),
    )


@dataclass(slots=True)
class StartV3:
    binlog_version: int
    server_version: str
    create_timestamp: int


def decode_start_v3(buf: bytes, state: DecodeState, header: EventHeader) -> StartV3:
    c = Cursor(buf)
    return StartV3(c.u16(), c.take(50).split(b"\0", 1)[0].decode("latin-1"), c.u32())


@dataclass(slots=True)
class Rotate:
    position: int
    next_file: str


def decode_rotate(buf: bytes, state: DecodeState, header: EventHeader) -> Rotate:
    c = Cursor(buf)
    fde = state.fde
    pos = c.u64() if fde is None or fde.post_header_len(4, 8) >= 8 else 4
    return Rotate(pos, c.rest().decode("utf-8", "surrogateescape"))


@dataclass(slots=True)
class Stop:
    pass


def decode_stop(buf: bytes, state: DecodeState, header: EventHeader) -> Stop:
    return Stop()


@dataclass(slots=True)
class Xid:
    xid: int


def decode_xid(buf: bytes, state: DecodeState, header: EventHeader) -> Xid:
    return Xid(Cursor(buf).u64())


INTVAR_TYPES = {0: "INVALID_INT", 1: "LAST_INSERT_ID", 2: "INSERT_ID"}


@dataclass(slots=True)
class Intvar:
    kind: int
    value: int

    @property
    def kind_name(self) -> str:
        return INTVAR_TYPES.get(self.kind, str(self.kind))


def decode_intvar(buf: bytes, state: DecodeState, header: EventHeader) -> Intvar:
    c = Cursor(buf)
    return Intvar(c.u8(), c.u64())


@dataclass(slots=True)
class Rand:
    seed1: int
    seed2: int


def decode_rand(buf: bytes, state: DecodeState, header: EventHeader) -> Rand:
    c = Cursor(buf)
    return Rand(c.u64(), c.u64())


USER_VAR_TYPES = {0: "STRING", 1: "REAL", 2: "INT", 3: "ROW", 4: "DECIMAL"}


@dataclass(slots=True)
class UserVar:
    name: str
    is_null: bool
    value_type: int | None = None
    charset: int | None = None
    value: bytes | None = None
    flags: int | None = None  # bit 0: unsigned


def decode_user_var(buf: bytes, state: DecodeState, header: EventHeader) -> UserVar:
    c = Cursor(buf)
    name = c.take(c.u32()).decode("utf-8", "surrogateescape")
    if c.u8():
        return UserVar(name, True)
    vtype = c.u8()
    charset = c.u32()
    value = c.take(c.u32())
    flags = c.u8() if c.remaining else None
    return UserVar(name, False, vtype, charset, value, flags)


INCIDENT_TYPES = {0: "NONE", 1: "LOST_EVENTS"}


@dataclass(slots=True)
class Incident:
    incident: int
    message: str


def decode_incident(buf: bytes, state: DecodeState, header: EventHeader) -> Incident:
    c = Cursor(buf)
    kind = c.u16()
    msg = c.take(c.u8()).decode("utf-8", "surrogateescape") if c.remaining else ""
    return Incident(kind, msg)


@dataclass(slots=True)
class Heartbeat:
    log_file: str
    log_position: int


def decode_heartbeat(buf: bytes, state: DecodeState, header: EventHeader) -> Heartbeat:
    return Heartbeat(buf.decode("utf-8", "surrogateescape"), header.log_pos)


def decode_heartbeat_v2(buf: bytes, state: DecodeState, header: EventHeader) -> Heartbeat:
    """Heartbeat v2 is a list of (type, length, value) fields: 1 = file name, 2 = position."""
    c = Cursor(buf)
    name, pos = "", header.log_pos
    while c.remaining:
        kind = c.lenenc()
        if kind == 0:
            break
        value = c.take(c.lenenc() or 0)
        if kind == 1:
            name = value.decode("utf-8", "surrogateescape")
        elif kind == 2:
            pos = Cursor(value).lenenc() or 0
    return Heartbeat(name, pos)


@dataclass(slots=True)
class RowsQuery:
    query: str


def decode_rows_query(buf: bytes, state: DecodeState, header: EventHeader) -> RowsQuery:
    # One length byte (truncated at 255, so unreliable) and then the statement to the end.
    return RowsQuery(buf[1:].decode("utf-8", "surrogateescape"))


def decode_annotate_rows(buf: bytes, state: DecodeState, header: EventHeader) -> RowsQuery:
    return RowsQuery(buf.decode("utf-8", "surrogateescape"))


@dataclass(slots=True)
class XaPrepare:
    one_phase: bool
    format_id: int
    gtrid: bytes
    bqual: bytes


def decode_xa_prepare(buf: bytes, state: DecodeState, header: EventHeader) -> XaPrepare:
    c = Cursor(buf)
    one_phase = bool(c.u8())
    format_id = c.u32()
    glen = c.u32()
    blen = c.u32()
    if glen > 64 or blen > 64:
        raise ValueError(f"XA id lengths {glen}/{blen} exceed 64")
    return XaPrepare(one_phase, format_id, c.take(glen), c.take(blen))


@dataclass(slots=True)
class LoadFile:
    """CREATE_FILE / APPEND_BLOCK / BEGIN_LOAD_QUERY / EXEC_LOAD / DELETE_FILE: a file id and data."""

    file_id: int
    data: bytes


def decode_file_block(buf: bytes, state: DecodeState, header: EventHeader) -> LoadFile:
    c = Cursor(buf)
    return LoadFile(c.u32(), c.rest())


# ---- encoders: body bytes from a decoded body (the writer adds header and checksum) --------------


def encode_format_description(b: FormatDescription) -> bytes:
    out = struct.pack("<H", b.binlog_version) + b.server_version.encode("latin-1").ljust(50, b"\0")[:50]
    out += struct.pack("<IB", b.create_timestamp, b.header_length)
    lengths = b.post_header_lengths
    if b.event_type_permutation is not None:  # back to the pre-release numbering the file used
        perm = b.event_type_permutation
        lengths = bytes(lengths[perm[old] - 1] for old in range(1, len(lengths) + 1))
    out += lengths
    if b.checksum_alg is not None:
        out += bytes([b.checksum_alg])
    return out


def encode_start_v3(b: StartV3) -> bytes:
    return (
        struct.pack("<H", b.binlog_version)
        + b.server_version.encode("latin-1").ljust(50, b"\0")
        + struct.pack("<I", b.create_timestamp)
    )


def encode_rotate(b: Rotate) -> bytes:
    return struct.pack("<Q", b.position) + b.next_file.encode("utf-8", "surrogateescape")


def encode_stop(b: Stop) -> bytes:
    return b""


def encode_xid(b: Xid) -> bytes:
    return struct.pack("<Q", b.xid)


def encode_intvar(b: Intvar) -> bytes:
    return struct.pack("<BQ", b.kind, b.value)


def encode_rand(b: Rand) -> bytes:
    return struct.pack("<QQ", b.seed1, b.seed2)


def encode_user_var(b: UserVar) -> bytes:
    name = b.name.encode("utf-8", "surrogateescape")
    out = struct.pack("<I", len(name)) + name
    if b.is_null:
        return out + b"\x01"
    value = b.value or b""
    out += b"\x00" + struct.pack("<BII", b.value_type or 0, b.charset or 0, len(value)) + value
    return out + (bytes([b.flags]) if b.flags is not None else b"")


def encode_incident(b: Incident) -> bytes:
    msg = b.message.encode("utf-8", "surrogateescape")
    return struct.pack("<HB", b.incident, len(msg)) + msg


def encode_heartbeat(b: Heartbeat) -> bytes:
    return b.log_file.encode("utf-8", "surrogateescape")


def encode_rows_query(b: RowsQuery) -> bytes:
    text = b.query.encode("utf-8", "surrogateescape")
    return bytes([min(len(text), 255)]) + text


def encode_annotate_rows(b: RowsQuery) -> bytes:
    return b.query.encode("utf-8", "surrogateescape")


def encode_xa_prepare(b: XaPrepare) -> bytes:
    return struct.pack("<BIII", int(b.one_phase), b.format_id, len(b.gtrid), len(b.bqual)) + b.gtrid + b.bqual


def encode_file_block(b: LoadFile) -> bytes:
    return struct.pack("<I", b.file_id) + b.data
