"""WRITE / UPDATE / DELETE rows events (v0, v1, v2, MariaDB-compressed) and PARTIAL_UPDATE_ROWS.

A row image is a list with one slot per table column: the decoded value, ``None`` for SQL NULL, or
``ABSENT`` for a column the image does not carry (MINIMAL / NOBLOB images).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from binlake.events.base import DecodeState, EventHeader
from binlake.events.query import compress_mariadb, uncompress_mariadb
from binlake.events.table_map import TableMap
from binlake.events.types import ROWS_EVENT_KINDS, EventType
from binlake.values import plan
from binlake.values.json_binary import decode_json_binary
from binlake.values.plan import PLANS
from binlake.values.rowcount import COUNTERS
from binlake.wire import Cursor, ShortRead, bits_set, encode_lenenc


class _Absent:
    """A column the row image does not include (not NULL: unknown)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT = _Absent()

STMT_END_F = 0x1
NO_FOREIGN_KEY_CHECKS_F = 0x2
RELAXED_UNIQUE_CHECKS_F = 0x4
COMPLETE_ROWS_F = 0x8

JSON_DIFF_OPS = {0: "REPLACE", 1: "INSERT", 2: "REMOVE"}


@dataclass(slots=True)
class JsonDiff:
    operation: str
    path: str
    value: Any = None  # decoded JSON (absent for REMOVE)


@dataclass(slots=True)
class PartialJson:
    """A JSON column of a PARTIAL_UPDATE_ROWS after-image given as edits of the before-image."""

    diffs: list[JsonDiff]


@dataclass(slots=True)
class Rows:
    operation: str  # insert | update | delete
    version: int
    table_id: int
    flags: int
    column_count: int
    columns_before: int  # bitmap of columns in the before image
    columns_after: int
    extra: bytes = b""
    partition_id: int | None = None
    source_partition_id: int | None = None
    table: TableMap | None = None
    rows: list[tuple[list[Any] | None, list[Any] | None]] = field(default_factory=list)
    raw_rows: bytes | None = None  # kept when rows were not decoded (see ``undecoded_reason``)
    undecoded_reason: str | None = None
    compressed: bool = False
    partial: bool = False
    # MySQL 8 writes the unused bits of each NULL bitmap as 0, older servers and MariaDB as 1
    null_padding: bool = True
    # rows counted by their lengths but not decoded (``DecodeState.count_rows``); None otherwise
    counted: int | None = None

    @property
    def end_of_statement(self) -> bool:
        return bool(self.flags & STMT_END_F)

    @property
    def row_total(self) -> int:
        """How many rows the event changes: decoded, or only counted."""
        return len(self.rows) if self.counted is None else self.counted


def _json_diffs(data: bytes) -> PartialJson:
    c = Cursor(data)
    diffs = []
    while c.remaining:
        op = c.u8()
        if op not in JSON_DIFF_OPS:
            raise ValueError(f"unknown JSON diff operation {op}")
        path = c.lenenc_bytes().decode("utf-8", "surrogateescape")
        value = None
        if op != 2:
            value = decode_json_binary(c.lenenc_bytes())
        diffs.append(JsonDiff(JSON_DIFF_OPS[op], path, value))
    return PartialJson(diffs)


def decode_image(
    buf: bytes, pos: int, present: list[int], tm: TableMap, partial_cols: frozenset[int] = frozenset()
) -> tuple[list[Any], int]:
    decoders = tm.decoders
    n = len(present)
    nb = (n + 7) >> 3
    if pos + nb > len(buf):
        raise ValueError("row image ends inside its NULL bitmap")
    nulls = int.from_bytes(buf[pos : pos + nb], "little")
    pos += nb
    row: list[Any] = [ABSENT] * len(tm.columns)
    for j, i in enumerate(present):
        if nulls >> j & 1:
            row[i] = None
        elif i in partial_cols:
            width = tm.columns[i].meta
            size = int.from_bytes(buf[pos : pos + width], "little")
            end = pos + width + size
            if end > len(buf):
                raise ValueError("partial JSON runs past the event")
            row[i] = _json_diffs(buf[pos + width : end])
            pos = end
        else:
            row[i], pos = decoders[i](buf, pos)
    return row, pos


def _row_plan(ev: Rows, tm: TableMap) -> tuple[int, Any]:
    """(columns in the first image, generated decoder of every row) for this event's images,
    memoised on the table map: the same map is reused by every transaction of the table."""
    key = (ev.operation, ev.columns_before, ev.columns_after)
    plans = tm.row_plans
    plan = plans.get(key)
    if plan is None:
        n, op = ev.column_count, ev.operation
        before = tuple(bits_set(ev.columns_before, n))
        after = tuple(bits_set(ev.columns_after, n))
        fn = PLANS.get(
            tm.signature,
            tm.columns,
            before if op != "insert" else None,
            after if op != "delete" else None,
            ABSENT,
        )
        if len(plans) >= 64:
            plans.clear()
        plan = plans[key] = (len(before if op != "insert" else after), fn)
    return plan


def count_rows_data(ev: Rows, buf: bytes, tm: TableMap) -> int | None:
    """The rows of the event by their lengths alone (a counter generated per layout), or None when
    the walk does not end exactly at the event's end: damage, which decoding will describe."""
    if len(tm.columns) != ev.column_count:
        return None
    n, op = ev.column_count, ev.operation
    key = ("count", op, ev.columns_before, ev.columns_after)
    count = tm.row_plans.get(key)
    if count is None:
        before = tuple(bits_set(ev.columns_before, n)) if op != "insert" else None
        after = tuple(bits_set(ev.columns_after, n)) if op != "delete" else None
        if len(tm.row_plans) >= 64:
            tm.row_plans.clear()
        count = tm.row_plans[key] = COUNTERS.get(tm.signature, tm.columns, before, after)
    try:
        rows, pos = count(buf, 0, len(buf))
    except (IndexError, ValueError):
        return None
    return rows if pos == len(buf) else None


def decode_rows_data(ev: Rows, buf: bytes, tm: TableMap, is_partial: bool) -> None:
    if len(tm.columns) != ev.column_count:
        raise ValueError(f"rows event has {ev.column_count} columns, its table map {len(tm.columns)}")
    end = len(buf)
    if not is_partial:
        nfirst, decode_all = _row_plan(ev, tm)
        if buf and nfirst % 8:
            ev.null_padding = bool(buf[(nfirst - 1) >> 3] >> (nfirst % 8))
        ev.rows, pos = decode_all(buf, 0, end)
    else:
        # PARTIAL_UPDATE_ROWS: value options and partial-JSON bits sit between the two images
        before = bits_set(ev.columns_before, ev.column_count)
        after = bits_set(ev.columns_after, ev.column_count)
        if buf and len(before) % 8:
            ev.null_padding = bool(buf[(len(before) - 1) >> 3] >> (len(before) % 8))
        json_cols = tm.json_columns
        pos = 0
        while pos < end:
            b, pos = decode_image(buf, pos, before, tm)
            c = Cursor(buf, pos)
            partial: frozenset[int] = frozenset()
            if (c.lenenc() or 0) & 1:
                bits = c.bitmap(len(json_cols))
                partial = frozenset(col for k, col in enumerate(json_cols) if bits >> k & 1)
            a, pos = decode_image(buf, c.pos, after, tm, partial)
            ev.rows.append((b, a))
    if pos != end:
        raise ValueError(f"row data overran the event by {pos - end} bytes")


def _header(buf: bytes, post: int, version: int, op: str) -> tuple[int, int, bytes, int, int, int, int]:
    """(table id, flags, extra data, column count, before bitmap, after bitmap, where the rows start).
    Bitmaps are kept as written (servers set the padding bits); readers look at the first ncols."""
    size = len(buf)
    p = 4 if post == 6 else 6
    if size < p + 3:
        raise ShortRead(f"rows event body of {size} bytes ends inside its header")
    table_id = int.from_bytes(buf[:p], "little")
    flags = buf[p] | buf[p + 1] << 8
    p += 2
    extra = b""
    if version == 2 and post >= 10:
        extra_len = buf[p] | buf[p + 1] << 8 if p + 2 <= size else -1
        if extra_len < 0:
            raise ShortRead("rows event ends inside its extra data length")
        if extra_len < 2:
            raise ValueError(f"extra data length {extra_len} is below 2")
        if p + extra_len > size:
            raise ShortRead(f"extra data of {extra_len - 2} bytes runs past the event")
        extra = buf[p + 2 : p + extra_len]
        p += extra_len
    if p < size and buf[p] < 0xFB:  # the column count, almost always one byte
        ncols = buf[p]
        p += 1
    else:
        c = Cursor(buf, p)
        ncols = c.lenenc() or 0
        p = c.pos
    nb = (ncols + 7) >> 3
    cols_before = cols_after = 0
    if op != "insert":
        if p + nb > size:
            raise ShortRead("rows event ends inside its column bitmap")
        cols_before = int.from_bytes(buf[p : p + nb], "little")
        p += nb
    if op == "insert" or (op == "update" and version > 0):
        if p + nb > size:
            raise ShortRead("rows event ends inside its column bitmap")
        cols_after = int.from_bytes(buf[p : p + nb], "little")
        p += nb
    elif op == "update":
        cols_after = cols_before
    return table_id, flags, extra, ncols, cols_before, cols_after, p


NOT_ASKED = "row decoding was not asked for"  # the reason of rows read with ``decode_rows`` off


def decode_deferred(ev: Rows) -> Rows:
    """An event read with ``decode_rows`` off, its rows decoded now: what reading it with decoding on
    gives (a new event; ``ev`` is left as it is). Raises what decoding raises on damaged rows."""
    if ev.undecoded_reason != NOT_ASKED or ev.table is None or ev.raw_rows is None:
        return ev
    out = replace(ev, rows=[], raw_rows=None, undecoded_reason=None)
    decode_rows_data(out, ev.raw_rows, ev.table, out.partial)
    return out


def decode_rows(buf: bytes, state: DecodeState, header: EventHeader) -> Rows:
    op, version, compressed = ROWS_EVENT_KINDS[header.type_code]
    fde = state.fde
    default_post = 10 if version == 2 else 8
    post = fde.post_header_len(header.type_code, default_post) if fde else default_post
    fast = plan.rows_header
    if fast is not None and type(buf) is bytes:  # the compiled reader, the same tuple and errors
        table_id, flags, extra, ncols, cols_before, cols_after, start = fast(buf, post, version, op, _header)
    else:
        table_id, flags, extra, ncols, cols_before, cols_after, start = _header(buf, post, version, op)
    partition_id = source_partition_id = None
    if extra[:1] == b"\x01" and len(extra) >= 3:  # partition info
        partition_id = int.from_bytes(extra[1:3], "little")
        if op == "update" and len(extra) >= 5:
            source_partition_id = int.from_bytes(extra[3:5], "little")
    data = buf[start:]
    if compressed:
        data = uncompress_mariadb(data, state.max_payload)
    ev = Rows(
        op,
        version,
        table_id,
        flags,
        ncols,
        cols_before,
        cols_after,
        extra,
        partition_id,
        source_partition_id,
        compressed=compressed,
        partial=header.type_code == EventType.PARTIAL_UPDATE_ROWS,
    )
    tm: TableMap | None = state.table_maps.get(table_id)
    ev.table = tm
    reason = None
    if tm is None:
        reason = f"no TABLE_MAP for table id {table_id} before this event"
    elif version == 0:
        reason = "pre-GA (v0) rows use the table's record format, which the binlog does not describe"
    elif tm.undecodable:
        reason = tm.undecodable
    elif not state.decode_rows:
        if state.count_rows and not ev.partial:
            ev.counted = count_rows_data(ev, data, tm)
        if ev.counted is None:  # not asked for, or the walk found damage: decoding says what
            reason = None if state.count_rows else NOT_ASKED
    if reason or tm is None:
        ev.raw_rows = data
        ev.undecoded_reason = reason
    elif ev.counted is None:
        decode_rows_data(ev, data, tm, ev.partial)
    else:
        ev.raw_rows = data
        ev.undecoded_reason = "rows were counted, not decoded"
    return ev


# ---- encoder ------------------------------------------------------------------------------------


def _encode_image(
    tm: TableMap,
    present: list[int],
    image: list[Any],
    partial: frozenset[int] = frozenset(),
    padding: bool = True,
) -> bytes:
    encoders = tm.encoders
    nulls = 0
    values = bytearray()
    for j, i in enumerate(present):
        v = image[i]
        if v is None:
            nulls |= 1 << j
        elif i in partial:
            diffs = _encode_diffs(v)
            values += len(diffs).to_bytes(tm.columns[i].meta, "little") + diffs
        else:
            values += encoders[i](v)
    nb = (len(present) + 7) >> 3
    if padding:
        nulls |= ((1 << nb * 8) - 1) ^ ((1 << len(present)) - 1)
    return nulls.to_bytes(nb, "little") + bytes(values)


def _encode_diffs(p: PartialJson) -> bytes:
    from binlake.values.json_binary import encode_json_binary

    out = bytearray()
    ops = {v: k for k, v in JSON_DIFF_OPS.items()}
    for d in p.diffs:
        path = d.path.encode("utf-8", "surrogateescape")
        out += bytes([ops[d.operation]]) + encode_lenenc(len(path)) + path
        if d.operation != "REMOVE":
            value = encode_json_binary(d.value)
            out += encode_lenenc(len(value)) + value
    return bytes(out)


def encode_rows_data(ev: Rows, tm: TableMap) -> bytes:
    before = bits_set(ev.columns_before, ev.column_count)
    after = bits_set(ev.columns_after, ev.column_count)
    json_cols = tm.json_columns
    out = bytearray()
    for b, a in ev.rows:
        if b is not None:
            out += _encode_image(tm, before, b, padding=ev.null_padding)
        if ev.partial:
            partial = frozenset(i for i in json_cols if a is not None and isinstance(a[i], PartialJson))
            if partial:
                bits = sum(1 << k for k, col in enumerate(json_cols) if col in partial)
                out += encode_lenenc(1) + bits.to_bytes((len(json_cols) + 7) // 8, "little")
            else:
                out += encode_lenenc(0)
        else:
            partial = frozenset()
        if a is not None:
            out += _encode_image(tm, after, a, partial, padding=ev.null_padding)
    return bytes(out)


def encode_rows(ev: Rows, table_id_width: int = 6) -> bytes:
    out = bytearray(ev.table_id.to_bytes(table_id_width, "little") + ev.flags.to_bytes(2, "little"))
    if ev.version == 2:
        out += (len(ev.extra) + 2).to_bytes(2, "little") + ev.extra
    nbytes = (ev.column_count + 7) // 8
    out += encode_lenenc(ev.column_count)
    if ev.operation in ("delete", "update"):
        out += ev.columns_before.to_bytes(nbytes, "little")
    if ev.operation == "insert" or (ev.operation == "update" and ev.version > 0):
        out += ev.columns_after.to_bytes(nbytes, "little")
    if ev.raw_rows is not None:
        data = ev.raw_rows
    else:
        if ev.table is None:
            raise ValueError("rows without a table map cannot be encoded")
        data = encode_rows_data(ev, ev.table)
    if ev.compressed:
        data = compress_mariadb(data)
    return bytes(out) + data
