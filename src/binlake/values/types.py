"""Column type codes, how many metadata bytes each carries in TABLE_MAP, and how they read."""

from __future__ import annotations

from enum import IntEnum


class ColumnType(IntEnum):
    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    VECTOR = 242
    BOOL = 244
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


def column_type_name(code: int) -> str:
    try:
        return ColumnType(code).name
    except ValueError:
        return f"TYPE_{code}"


# How the per-column metadata in TABLE_MAP is laid out: (size in bytes, byte order of 2-byte values).
META_LAYOUT: dict[int, tuple[int, str]] = {
    ColumnType.FLOAT: (1, "little"),
    ColumnType.DOUBLE: (1, "little"),
    ColumnType.BLOB: (1, "little"),
    ColumnType.TINY_BLOB: (1, "little"),
    ColumnType.MEDIUM_BLOB: (1, "little"),
    ColumnType.LONG_BLOB: (1, "little"),
    ColumnType.GEOMETRY: (1, "little"),
    ColumnType.JSON: (1, "little"),
    ColumnType.VECTOR: (1, "little"),
    ColumnType.TIMESTAMP2: (1, "little"),
    ColumnType.DATETIME2: (1, "little"),
    ColumnType.TIME2: (1, "little"),
    ColumnType.VARCHAR: (2, "little"),
    ColumnType.BIT: (2, "little"),
    ColumnType.STRING: (2, "big"),
    ColumnType.VAR_STRING: (2, "big"),
    ColumnType.ENUM: (2, "big"),
    ColumnType.SET: (2, "big"),
    ColumnType.NEWDECIMAL: (2, "big"),
    ColumnType.DECIMAL: (2, "big"),
}

# Types whose signedness is recorded in the SIGNEDNESS optional metadata (YEAR included).
NUMERIC_TYPES = frozenset(
    {
        ColumnType.TINY,
        ColumnType.SHORT,
        ColumnType.INT24,
        ColumnType.LONG,
        ColumnType.LONGLONG,
        ColumnType.FLOAT,
        ColumnType.DOUBLE,
        ColumnType.NEWDECIMAL,
        ColumnType.DECIMAL,
        ColumnType.YEAR,
    }
)

# Types that get a collation in DEFAULT_CHARSET / COLUMN_CHARSET (ENUM and SET have their own lists;
# MySQL 9 lists VECTOR, a binary string, here too).
CHARACTER_TYPES = frozenset(
    {
        ColumnType.VECTOR,
        ColumnType.STRING,
        ColumnType.VAR_STRING,
        ColumnType.VARCHAR,
        ColumnType.BLOB,
        ColumnType.TINY_BLOB,
        ColumnType.MEDIUM_BLOB,
        ColumnType.LONG_BLOB,
    }
)

BLOB_TYPES = frozenset({ColumnType.BLOB, ColumnType.TINY_BLOB, ColumnType.MEDIUM_BLOB, ColumnType.LONG_BLOB})

# The width of a BLOB's length prefix when its metadata does not give one (0: only the metadata can)
BLOB_LENGTH_WIDTH: dict[int, int] = {
    ColumnType.BLOB: 0,
    ColumnType.TINY_BLOB: 1,
    ColumnType.MEDIUM_BLOB: 3,
    ColumnType.LONG_BLOB: 4,
    ColumnType.GEOMETRY: 0,
}

# Types whose decoded value is a plain int (YEAR as its number)
INTEGER_TYPES = frozenset(
    {ColumnType.TINY, ColumnType.SHORT, ColumnType.INT24, ColumnType.LONG, ColumnType.LONGLONG, ColumnType.YEAR}
)


def real_type(type_code: int, meta: int) -> int:
    """ENUM and SET are logged as STRING with the real type in the high metadata byte."""
    if type_code == ColumnType.STRING and meta >= 256:
        b0 = meta >> 8
        if b0 in (ColumnType.ENUM, ColumnType.SET):
            return b0
    return type_code


def string_max_length(meta: int) -> int:
    """CHAR's maximum byte length: the low byte plus two bits folded into the high byte (CHAR > 255)."""
    b0, b1 = meta >> 8, meta & 0xFF
    if (b0 & 0x30) != 0x30:
        return b1 | (((b0 & 0x30) ^ 0x30) << 4)
    return b1
