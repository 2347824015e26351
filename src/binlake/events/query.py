"""QUERY events (statements, BEGIN/COMMIT, DDL, XA) with every status variable, MariaDB and PolarDB-X
ones included; MariaDB's compressed QUERY and EXECUTE_LOAD_QUERY share the layout."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from binlake.errors import SizeLimitError
from binlake.events.base import DecodeState, EventHeader
from binlake.events.types import EventType
from binlake.sizes import DEFAULT_MAX_PAYLOAD, MAX_PAYLOAD_ENV
from binlake.wire import Cursor


def _u(n: int) -> Callable[[Cursor], Any]:
    return lambda c: c.uint(n)


def _str1(c: Cursor) -> str:
    return c.take(c.u8()).decode("utf-8", "surrogateescape")


def _str1z(c: Cursor) -> str:
    s = _str1(c)
    c.skip(1)
    return s


def _auto_increment(c: Cursor) -> dict[str, int]:
    return {"increment": c.u16(), "offset": c.u16()}


def _charset(c: Cursor) -> dict[str, int]:
    return {"client": c.u16(), "connection": c.u16(), "server": c.u16()}


def _invoker(c: Cursor) -> dict[str, str]:
    return {"user": _str1(c), "host": _str1(c)}


def _updated_db_names(c: Cursor) -> list[str] | None:
    n = c.u8()
    if n == 254:  # OVER_MAX_DBS_IN_EVENT_MTS
        return None
    return [c.cstring().decode("utf-8", "surrogateescape") for _ in range(n)]


def _character_set_collations(c: Cursor) -> list[tuple[int, int]]:
    n = c.u8()
    return [(c.u16(), c.u16()) for _ in range(n)]


# code -> (name, reader). A code not listed ends parsing: the remaining status bytes are kept raw.
STATUS_VARS: dict[int, tuple[str, Callable[[Cursor], Any]]] = {
    0: ("flags2", _u(4)),
    1: ("sql_mode", _u(8)),
    2: ("catalog", _str1z),
    3: ("auto_increment", _auto_increment),
    4: ("charset", _charset),
    5: ("time_zone", _str1),
    6: ("catalog_nz", _str1),
    7: ("lc_time_names", _u(2)),
    8: ("charset_database", _u(2)),
    9: ("table_map_for_update", _u(8)),
    10: ("master_data_written", _u(4)),
    11: ("invoker", _invoker),
    12: ("updated_db_names", _updated_db_names),
    13: ("microseconds", _u(3)),
    14: ("commit_ts", _u(8)),
    15: ("commit_ts2", _u(8)),
    16: ("explicit_defaults_for_timestamp", _u(1)),
    17: ("ddl_logged_with_xid", _u(8)),
    18: ("default_collation_for_utf8mb4", _u(2)),
    19: ("sql_require_primary_key", _u(1)),
    20: ("default_table_encryption", _u(1)),
    # MariaDB
    128: ("hrnow", _u(3)),
    129: ("xid", _u(8)),
    130: ("gtid_flags3", _u(1)),
    131: ("character_set_collations", _character_set_collations),
    # PolarDB-X (Lizard) commit / prepare GCN carried on XA COMMIT / XA END
    200: ("lizard_commit_gcn", _u(8)),
    201: ("lizard_prepare_gcn", _u(8)),
}


@dataclass(slots=True)
class Query:
    thread_id: int
    exec_time: int
    error_code: int
    database: str
    query: str
    status: dict[str, Any] = field(default_factory=dict)
    status_raw_tail: bytes = b""  # status bytes after a code we do not know (kept, never dropped)
    compressed: bool = False
    load_file_id: int | None = None  # EXECUTE_LOAD_QUERY
    load_extra: bytes = b""  # EXECUTE_LOAD_QUERY: file-name positions and duplicate handling


_STATUS_SEEN: dict[bytes, tuple[dict[str, Any], bytes]] = {}


def parse_status_vars(block: bytes) -> tuple[dict[str, Any], bytes]:
    """The status variables of a Query event (a copy of the dict: blocks repeat in every BEGIN of
    a session, so they are parsed once per distinct block)."""
    seen = _STATUS_SEEN.get(block)
    if seen is None:
        if len(_STATUS_SEEN) >= 1024:
            _STATUS_SEEN.clear()
        seen = _STATUS_SEEN[block] = _parse_status_vars(block)
    return dict(seen[0]), seen[1]


def _parse_status_vars(block: bytes) -> tuple[dict[str, Any], bytes]:
    c = Cursor(block)
    out: dict[str, Any] = {}
    while c.remaining:
        start = c.pos
        code = c.u8()
        entry = STATUS_VARS.get(code)
        if entry is None:
            return out, block[start:]
        name, reader = entry
        out[name] = reader(c)
    return out, b""


def uncompress_mariadb(data: bytes, limit: int = DEFAULT_MAX_PAYLOAD) -> bytes:
    """MariaDB ``log_bin_compress``: one header byte (0x80 | n), n big-endian bytes of the
    uncompressed length, then a zlib stream. A length over ``limit`` is refused before inflating."""
    if not data:
        raise ValueError("empty compressed block")
    lenlen = data[0] & 0x07
    if data[0] & 0x80 == 0 or not 1 <= lenlen <= 4:
        raise ValueError(f"bad compressed header byte 0x{data[0]:02x}")
    size = int.from_bytes(data[1 : 1 + lenlen], "big")
    if size > limit:
        raise SizeLimitError(
            f"compressed event claims {size} bytes, over the {limit}-byte ceiling ({MAX_PAYLOAD_ENV})",
            size=size,
            limit=limit,
        )
    try:
        out = zlib.decompressobj().decompress(data[1 + lenlen :], size)
    except zlib.error as e:
        raise ValueError(f"zlib: {e}") from None
    if len(out) != size:
        raise ValueError(f"compressed block gives {len(out)} bytes, header says {size}")
    return out


def decode_query(buf: bytes, state: DecodeState, header: EventHeader) -> Query:
    fde = state.fde
    post = fde.post_header_len(header.type_code, 13) if fde else 13
    if header.type_code == EventType.MARIA_QUERY_COMPRESSED and fde:
        post = fde.post_header_len(EventType.QUERY, 13)
    c = Cursor(buf)
    thread_id = c.u32()
    exec_time = c.u32()
    db_len = c.u8()
    error_code = c.u16()
    status_len = c.u16() if post >= 13 else 0
    load_file_id, load_extra = None, b""
    if header.type_code == EventType.EXECUTE_LOAD_QUERY:
        load_file_id = c.u32()
        load_extra = c.take(9)  # fn_pos_start, fn_pos_end, dup_handling
    else:
        c.pos = post if post > c.pos else c.pos
    status, tail = parse_status_vars(c.take(status_len))
    database = c.take(db_len).decode("utf-8", "surrogateescape")
    c.skip(1)
    text = c.rest()
    compressed = header.type_code == EventType.MARIA_QUERY_COMPRESSED
    if compressed:
        text = uncompress_mariadb(text, state.max_payload)
    return Query(
        thread_id,
        exec_time,
        error_code,
        database,
        text.decode("utf-8", "surrogateescape"),
        status,
        tail,
        compressed,
        load_file_id,
        load_extra,
    )


# ---- encoder ----------------------------------------------------------------------------------


def _w_str1(v: str) -> bytes:
    raw = v.encode("utf-8", "surrogateescape")
    return bytes([len(raw)]) + raw


_STATUS_WRITERS: dict[str, tuple[int, Callable[[Any], bytes]]] = {
    "flags2": (0, lambda v: v.to_bytes(4, "little")),
    "sql_mode": (1, lambda v: v.to_bytes(8, "little")),
    "catalog": (2, lambda v: _w_str1(v) + b"\0"),
    "auto_increment": (3, lambda v: v["increment"].to_bytes(2, "little") + v["offset"].to_bytes(2, "little")),
    "charset": (
        4,
        lambda v: b"".join(v[k].to_bytes(2, "little") for k in ("client", "connection", "server")),
    ),
    "time_zone": (5, _w_str1),
    "catalog_nz": (6, _w_str1),
    "lc_time_names": (7, lambda v: v.to_bytes(2, "little")),
    "charset_database": (8, lambda v: v.to_bytes(2, "little")),
    "table_map_for_update": (9, lambda v: v.to_bytes(8, "little")),
    "master_data_written": (10, lambda v: v.to_bytes(4, "little")),
    "invoker": (11, lambda v: _w_str1(v["user"]) + _w_str1(v["host"])),
    "updated_db_names": (
        12,
        lambda v: (
            b"\xfe"
            if v is None
            else bytes([len(v)]) + b"".join(d.encode("utf-8", "surrogateescape") + b"\0" for d in v)
        ),
    ),
    "microseconds": (13, lambda v: v.to_bytes(3, "little")),
    "commit_ts": (14, lambda v: v.to_bytes(8, "little")),
    "commit_ts2": (15, lambda v: v.to_bytes(8, "little")),
    "explicit_defaults_for_timestamp": (16, lambda v: v.to_bytes(1, "little")),
    "ddl_logged_with_xid": (17, lambda v: v.to_bytes(8, "little")),
    "default_collation_for_utf8mb4": (18, lambda v: v.to_bytes(2, "little")),
    "sql_require_primary_key": (19, lambda v: v.to_bytes(1, "little")),
    "default_table_encryption": (20, lambda v: v.to_bytes(1, "little")),
    "hrnow": (128, lambda v: v.to_bytes(3, "little")),
    "xid": (129, lambda v: v.to_bytes(8, "little")),
    "gtid_flags3": (130, lambda v: v.to_bytes(1, "little")),
    "character_set_collations": (
        131,
        lambda v: bytes([len(v)]) + b"".join(a.to_bytes(2, "little") + b.to_bytes(2, "little") for a, b in v),
    ),
    "lizard_commit_gcn": (200, lambda v: v.to_bytes(8, "little")),
    "lizard_prepare_gcn": (201, lambda v: v.to_bytes(8, "little")),
}


def encode_status_vars(status: dict[str, Any], tail: bytes = b"") -> bytes:
    out = bytearray()
    for name, value in status.items():
        code, write = _STATUS_WRITERS[name]
        out.append(code)
        out += write(value)
    return bytes(out) + tail


def compress_mariadb(data: bytes) -> bytes:
    size = len(data)
    lenlen = max(1, (size.bit_length() + 7) // 8)
    return bytes([0x80 | lenlen]) + size.to_bytes(lenlen, "big") + zlib.compress(data)


def encode_query(b: Query, post_header_len: int = 13) -> bytes:
    status = encode_status_vars(b.status, b.status_raw_tail)
    db = b.database.encode("utf-8", "surrogateescape")
    out = struct.pack("<IIBH", b.thread_id, b.exec_time, len(db), b.error_code)
    if post_header_len >= 13:
        out += struct.pack("<H", len(status))
    if b.load_file_id is not None:
        out += struct.pack("<I", b.load_file_id) + b.load_extra
    text = b.query.encode("utf-8", "surrogateescape")
    return out + status + db + b"\0" + (compress_mariadb(text) if b.compressed else text)
