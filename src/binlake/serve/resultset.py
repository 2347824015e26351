"""A text-protocol result set (protocol 4.1, with EOF packets: the server does not offer
CLIENT_DEPRECATE_EOF): column count, column definitions, EOF, rows, EOF. Every column is a
VAR_STRING in utf8, or a LONGLONG when its values are integers (a position, a file size), as a
server types them."""

from __future__ import annotations

import struct

from binlake.replication.packets import eof_packet, lenenc_str
from binlake.wire import encode_lenenc

UTF8_GENERAL_CI = 33
MYSQL_TYPE_VAR_STRING = 0xFD
MYSQL_TYPE_LONGLONG = 0x08
BINARY = 63
UNSIGNED_NUM = 0x0020 | 0x8000 | 0x0001  # UNSIGNED, NUM, NOT NULL
Value = str | int | None
NULL = b"\xfb"


def column_definition(name: str, integer: bool = False) -> bytes:
    encoded = name.encode("utf-8", "surrogateescape")
    kind = (
        (BINARY, 20, MYSQL_TYPE_LONGLONG, UNSIGNED_NUM)
        if integer
        else (UTF8_GENERAL_CI, 1024, MYSQL_TYPE_VAR_STRING, 0)
    )
    return (
        b"".join(lenenc_str(v) for v in (b"def", b"", b"", b"", encoded, encoded))
        + b"\x0c"
        + struct.pack("<HIBHB", *kind, 0)
        + b"\0\0"
    )


def row(values: tuple[Value, ...]) -> bytes:
    return b"".join(
        NULL if v is None else lenenc_str(str(v).encode("utf-8", "surrogateescape")) for v in values
    )


def result_set(columns: tuple[str, ...], rows: tuple[tuple[Value, ...], ...]) -> list[bytes]:
    """The payloads, in order (each gets the next sequence number)."""
    integer = [bool(rows) and all(isinstance(r[i], int) for r in rows) for i in range(len(columns))]
    return [
        encode_lenenc(len(columns)),
        *(column_definition(c, i) for c, i in zip(columns, integer, strict=True)),
        eof_packet(),
        *(row(r) for r in rows),
        eof_packet(),
    ]
