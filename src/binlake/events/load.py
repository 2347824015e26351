"""LOAD DATA events of old servers (LOAD, NEW_LOAD, CREATE_FILE): the fixed part decoded, the
variable part (field/line terminators, field names, table, file name, data) kept as bytes."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from binlake.events.base import DecodeState, EventHeader
from binlake.events.types import EventType
from binlake.wire import Cursor


@dataclass(slots=True)
class Load:
    thread_id: int
    exec_time: int
    skip_lines: int
    table_name_length: int
    db_length: int
    field_count: int
    file_id: int | None
    body: bytes


def decode_load(buf: bytes, state: DecodeState, header: EventHeader) -> Load:
    c = Cursor(buf)
    fields = (c.u32(), c.u32(), c.u32(), c.u8(), c.u8(), c.u32())
    # CREATE_FILE puts its file id right after the 18-byte LOAD header, in every binlog version.
    file_id = c.u32() if header.type_code == EventType.CREATE_FILE else None
    return Load(*fields, file_id, c.rest())


def encode_load(b: Load) -> bytes:
    out = struct.pack(
        "<IIIBBI", b.thread_id, b.exec_time, b.skip_lines, b.table_name_length, b.db_length, b.field_count
    )
    if b.file_id is not None:
        out += struct.pack("<I", b.file_id)
    return out + b.body
