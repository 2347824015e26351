"""The compiled row decoder's program: each present column of an image as one operation, held as
data (an operation name, two small integers, one object), which ``_fastrows`` interprets in C.

A type with no operation here gets ``CALL`` with the column's Python decoder (``column_decoder``),
so every type decodes and the rare ones (JSON documents, GEOMETRY kept as bytes aside, old
TIME/DATETIME, VECTOR, two-byte ENUM/SET, BIT wider than 64) stay in Python. The values are the
pure path's (``binlake.values.plan``), which stays the reference: tests decode every rows event of
the corpus and of generated series both ways and require identical values and errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from binlake import native
from binlake.values.charsets import codec_for
from binlake.values.columns import ColumnDef, column_decoder
from binlake.values.json_binary import decode_json_column
from binlake.values.numeric import bit_length
from binlake.values.strings import enum_table, set_table
from binlake.values.types import BLOB_LENGTH_WIDTH, ColumnType, string_max_length

Spec = tuple[str, int, int, Any]  # (operation, a, b, object)
Op = tuple[int, str, int, int, Any]  # the spec with the column's index in front

_INTS: dict[int, str] = {
    ColumnType.TINY: "INT8",
    ColumnType.SHORT: "INT16",
    ColumnType.INT24: "INT24",
    ColumnType.LONG: "INT32",
    ColumnType.LONGLONG: "INT64",
}


MAX_FSP = 6


def _int(col: ColumnDef) -> Spec:
    name = _INTS[col.real_type]
    return ("U" + name if col.unsigned else name, 0, 0, None)


def _codec(codec: str | None) -> bytes | None:
    """The codec name as the C decoder takes it; None keeps bytes (a binary collation)."""
    return None if codec is None else ("utf-8" if codec == "?" else codec).encode("ascii")


def _string(width: int, codec: str | None, pad_to: int = 0) -> Spec:
    """A length-prefixed string: ``a`` the prefix width, ``b`` BINARY(n)'s length to pad to."""
    return ("STR", width, pad_to, _codec(codec))


def _varchar(col: ColumnDef) -> Spec:
    return _string(1 if col.meta < 256 else 2, codec_for(col.collation))


def _char(col: ColumnDef) -> Spec:
    max_len = string_max_length(col.meta)
    codec = codec_for(col.collation)
    return _string(1 if max_len < 256 else 2, codec, max_len if codec is None else 0)


def _blob(col: ColumnDef) -> Spec | None:
    width = col.meta or BLOB_LENGTH_WIDTH[col.real_type]
    codec = None if col.real_type == ColumnType.GEOMETRY else codec_for(col.collation)
    return _string(width, codec) if 1 <= width <= 4 else None


# the JSON documents in C too, when built (the same values as ``decode_json_column``): the compiled
# row decoder calls it, so it is used exactly when that decoder is chosen
JSON_READER = native.OptionalModule("binlake.values._fastjson", 1)
_json_column = decode_json_column if JSON_READER.built is None else JSON_READER.built.decode_json_column


def _json(col: ColumnDef) -> Spec | None:
    return ("JSON", col.meta, 0, _json_column) if 1 <= col.meta <= 4 else None


def _fsp(col: ColumnDef) -> int:
    if col.meta > MAX_FSP:
        raise ValueError(f"column {col.label}: fractional second precision {col.meta} is over {MAX_FSP}")
    return col.meta


def _decimal(col: ColumnDef) -> Spec | None:
    """DECIMAL in C up to MySQL's 65 digits; a group over its digits (damage) is read by the
    Python decoder (the ``object``), whose arithmetic carries it as the pure path does."""
    precision, scale = col.meta >> 8, col.meta & 0xFF
    if scale > precision or precision == 0 or precision > 65:
        return None
    return ("DECIMAL", precision, scale, column_decoder(col))


def _bit(col: ColumnDef) -> Spec | None:
    n = (bit_length(col.meta) + 7) // 8
    return ("BIT", n, 0, None) if 1 <= n <= 8 else None


def _one_byte(names: list[str] | None, table: Callable[[list[str]], list[Any]]) -> Spec:
    """A one-byte ENUM or SET: the value of every byte precomputed, or the byte without names."""
    return ("UINT8", 0, 0, None) if names is None else ("TABLE", 0, 0, table(names))


def _enum(col: ColumnDef) -> Spec | None:
    return _one_byte(col.enum_values, enum_table) if col.meta & 0xFF == 1 else None


def _set(col: ColumnDef) -> Spec | None:
    return _one_byte(col.set_values, set_table) if col.meta & 0xFF == 1 else None


# type -> its operation (None from a builder: the column's Python decoder)
OPERATIONS: dict[int, Callable[[ColumnDef], Spec | None]] = {
    ColumnType.TINY: _int,
    ColumnType.SHORT: _int,
    ColumnType.INT24: _int,
    ColumnType.LONG: _int,
    ColumnType.LONGLONG: _int,
    ColumnType.FLOAT: lambda c: ("FLOAT", 0, 0, None),
    ColumnType.DOUBLE: lambda c: ("DOUBLE", 0, 0, None),
    ColumnType.VARCHAR: _varchar,
    ColumnType.STRING: _char,
    ColumnType.VAR_STRING: _char,
    ColumnType.BLOB: _blob,
    ColumnType.TINY_BLOB: _blob,
    ColumnType.MEDIUM_BLOB: _blob,
    ColumnType.LONG_BLOB: _blob,
    ColumnType.GEOMETRY: _blob,
    ColumnType.JSON: _json,
    ColumnType.TIME2: lambda c: ("TIME2", c.meta, 0, None),
    ColumnType.DATETIME2: lambda c: ("DATETIME2", _fsp(c), 0, None),
    ColumnType.TIMESTAMP2: lambda c: ("TIMESTAMP2", _fsp(c), 0, None),
    ColumnType.DATE: lambda c: ("DATE", 0, 0, None),
    ColumnType.NEWDATE: lambda c: ("DATE", 0, 0, None),
    ColumnType.YEAR: lambda c: ("YEAR", 0, 0, None),
    ColumnType.NEWDECIMAL: _decimal,
    ColumnType.BIT: _bit,
    ColumnType.ENUM: _enum,
    ColumnType.SET: _set,
}


def column_op(col: ColumnDef) -> Op:
    build = OPERATIONS.get(col.real_type)
    spec = build(col) if build else None
    if spec is None:
        spec = ("CALL", 0, 0, column_decoder(col))
    return (col.index, *spec)


def image_program(columns: list[ColumnDef], present: tuple[int, ...] | None) -> list[Op] | None:
    """The operations of one image, in the order its values are written (None: no such image)."""
    return None if present is None else [column_op(columns[i]) for i in present]
