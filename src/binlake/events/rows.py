"""WRITE / UPDATE / DELETE rows events (v0, v1, v2, MariaDB-compressed) and PARTIAL_UPDATE_ROWS.

A row image is a list with one slot per table column: the decoded value, ``None`` for SQL NULL, or
``ABSENT`` for a column the image does not carry (MINIMAL / NOBLOB images).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from binlake.events.base import DecodeState, EventHeader
from binlake.events.query import uncompress_mariadb
from binlake.events.table_map import TableMap, read_table_id
from binlake.events.types import ROWS_EVENT_KINDS, EventType
from binlake.values.json_binary import decode_json_binary
from binlake.values.plan import PLANS
from binlake.wire import Cursor, bits_set


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

    @property
    def end_of_statement(self) -> bool:
        return bool(self.flags & STMT_END_F)


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


def decode_rows_data(ev: Rows, buf: bytes, tm: TableMap, is_partial: bool) -> None:
    if len(tm.columns) != ev.column_count:
        raise ValueError(f"rows event has {ev.column_count} columns, its table map {len(tm.columns)}")
    before = tuple(bits_set(ev.columns_before, ev.column_count))
    after = tuple(bits_set(ev.columns_after, ev.column_count))
    pos, end = 0, len(buf)
    op = ev.operation
    if not is_partial:
        decode_all = PLANS.get(
            tm.signature,
            tm.columns,
            before if op != "insert" else None,
            after if op != "delete" else None,
            ABSENT,
        )
        ev.rows, pos = decode_all(buf, 0, end)
    else:
        # PARTIAL_UPDATE_ROWS: value options and partial-JSON bits sit between the two images
        json_cols = tm.json_columns
        while pos < end:
            b, pos = decode_image(buf, pos, list(before), tm)
            c = Cursor(buf, pos)
            partial: frozenset[int] = frozenset()
            if (c.lenenc() or 0) & 1:
                bits = c.bitmap(len(json_cols))
                partial = frozenset(col for k, col in enumerate(json_cols) if bits >> k & 1)
            a, pos = decode_image(buf, c.pos, list(after), tm, partial)
            ev.rows.append((b, a))
    if pos != end:
        raise ValueError(f"row data overran the event by {pos - end} bytes")


def decode_rows(buf: bytes, state: DecodeState, header: EventHeader) -> Rows:
    op, version, compressed = ROWS_EVENT_KINDS[header.type_code]
    fde = state.fde
    default_post = 10 if version == 2 else 8
    post = fde.post_header_len(header.type_code, default_post) if fde else default_post
    c = Cursor(buf)
    table_id = read_table_id(c, post)
    flags = c.u16()
    extra = b""
    partition_id = source_partition_id = None
    if version == 2 and post >= 10:
        extra_len = c.u16()
        if extra_len < 2:
            raise ValueError(f"extra data length {extra_len} is below 2")
        extra = c.take(extra_len - 2)
        if extra[:1] == b"\x01" and len(extra) >= 3:  # partition info
            partition_id = int.from_bytes(extra[1:3], "little")
            if op == "update" and len(extra) >= 5:
                source_partition_id = int.from_bytes(extra[3:5], "little")
    ncols = c.lenenc() or 0
    cols_before = cols_after = 0
    mask = (1 << ncols) - 1
    if op in ("delete", "update"):
        cols_before = c.bitmap(ncols) & mask
    if op == "insert" or (op == "update" and version > 0):
        cols_after = c.bitmap(ncols) & mask
    elif op == "update":
        cols_after = cols_before
    data = c.rest()
    if compressed:
        data = uncompress_mariadb(data)
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
        reason = "row decoding was not asked for"
    if reason or tm is None:
        ev.raw_rows = data
        ev.undecoded_reason = reason
    else:
        decode_rows_data(ev, data, tm, ev.partial)
    return ev
