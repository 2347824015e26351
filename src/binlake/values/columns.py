"""A column as the binlog describes it, and the table of decoder factories keyed by column type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from binlake.values import numeric, strings, temporal
from binlake.values.charsets import codec_for
from binlake.values.types import ColumnType, real_type

Decoder = Callable[[bytes, int], tuple[Any, int]]


@dataclass(slots=True)
class ColumnDef:
    index: int
    type_code: int  # as logged (ENUM/SET appear as STRING)
    meta: int
    nullable: bool
    name: str | None = None
    unsigned: bool | None = None  # None: the binlog does not say
    collation: int | None = None
    enum_values: list[str] | None = None
    set_values: list[str] | None = None
    geometry_type: int | None = None
    visible: bool | None = None
    in_primary_key: bool = False
    vector_dimension: int | None = None

    @property
    def real_type(self) -> int:
        return real_type(self.type_code, self.meta)

    @property
    def label(self) -> str:
        return self.name if self.name is not None else f"@{self.index + 1}"


def _codec(col: ColumnDef) -> str | None:
    return codec_for(col.collation)


_FACTORIES: dict[int, Callable[[ColumnDef], Decoder]] = {
    ColumnType.TINY: lambda c: numeric.int_decoder(c.type_code, bool(c.unsigned)),
    ColumnType.SHORT: lambda c: numeric.int_decoder(c.type_code, bool(c.unsigned)),
    ColumnType.INT24: lambda c: numeric.int_decoder(c.type_code, bool(c.unsigned)),
    ColumnType.LONG: lambda c: numeric.int_decoder(c.type_code, bool(c.unsigned)),
    ColumnType.LONGLONG: lambda c: numeric.int_decoder(c.type_code, bool(c.unsigned)),
    ColumnType.FLOAT: lambda c: numeric.float_decoder(c.type_code),
    ColumnType.DOUBLE: lambda c: numeric.float_decoder(c.type_code),
    ColumnType.NEWDECIMAL: lambda c: numeric.decimal_decoder(c.meta),
    ColumnType.YEAR: lambda c: numeric.year_decoder(),
    ColumnType.BIT: lambda c: numeric.bit_decoder(c.meta),
    ColumnType.DATE: lambda c: temporal.date_decoder(),
    ColumnType.NEWDATE: lambda c: temporal.date_decoder(),
    ColumnType.TIME: lambda c: temporal.time_decoder(),
    ColumnType.DATETIME: lambda c: temporal.datetime_decoder(),
    ColumnType.TIMESTAMP: lambda c: temporal.timestamp_decoder(),
    ColumnType.TIMESTAMP2: lambda c: temporal.timestamp2_decoder(c.meta),
    ColumnType.DATETIME2: lambda c: temporal.datetime2_decoder(c.meta),
    ColumnType.TIME2: lambda c: temporal.time2_decoder(c.meta),
    ColumnType.VARCHAR: lambda c: strings.varchar_decoder(c.meta, _codec(c)),
    ColumnType.VAR_STRING: lambda c: strings.string_decoder(c.meta, _codec(c)),
    ColumnType.STRING: lambda c: strings.string_decoder(c.meta, _codec(c)),
    ColumnType.ENUM: lambda c: strings.enum_decoder(c.meta & 0xFF, c.enum_values),
    ColumnType.SET: lambda c: strings.set_decoder(c.meta & 0xFF, c.set_values),
    ColumnType.BLOB: lambda c: strings.blob_decoder(c.meta, _codec(c)),
    ColumnType.TINY_BLOB: lambda c: strings.blob_decoder(c.meta or 1, _codec(c)),
    ColumnType.MEDIUM_BLOB: lambda c: strings.blob_decoder(c.meta or 3, _codec(c)),
    ColumnType.LONG_BLOB: lambda c: strings.blob_decoder(c.meta or 4, _codec(c)),
    ColumnType.GEOMETRY: lambda c: strings.blob_decoder(c.meta, None),
    ColumnType.JSON: lambda c: strings.json_decoder(c.meta),
    ColumnType.VECTOR: lambda c: strings.vector_decoder(c.meta),
    ColumnType.NULL: lambda c: lambda buf, pos: (None, pos),
}


class UnsupportedColumnType(ValueError):
    pass


def column_decoder(col: ColumnDef) -> Decoder:
    factory = _FACTORIES.get(col.real_type)
    if factory is None:
        raise UnsupportedColumnType(f"column {col.label} has type {col.type_code} that binlogs do not carry")
    return factory(col)


Encoder = Callable[[Any], bytes]

_ENCODER_FACTORIES: dict[int, Callable[[ColumnDef], Encoder]] = {
    ColumnType.TINY: lambda c: numeric.int_encoder(c.type_code, bool(c.unsigned)),
    ColumnType.SHORT: lambda c: numeric.int_encoder(c.type_code, bool(c.unsigned)),
    ColumnType.INT24: lambda c: numeric.int_encoder(c.type_code, bool(c.unsigned)),
    ColumnType.LONG: lambda c: numeric.int_encoder(c.type_code, bool(c.unsigned)),
    ColumnType.LONGLONG: lambda c: numeric.int_encoder(c.type_code, bool(c.unsigned)),
    ColumnType.FLOAT: lambda c: numeric.float_encoder(c.type_code),
    ColumnType.DOUBLE: lambda c: numeric.float_encoder(c.type_code),
    ColumnType.NEWDECIMAL: lambda c: numeric.decimal_encoder(c.meta),
    ColumnType.YEAR: lambda c: numeric.year_encoder(),
    ColumnType.BIT: lambda c: numeric.bit_encoder(c.meta),
    ColumnType.DATE: lambda c: temporal.date_encoder(),
    ColumnType.NEWDATE: lambda c: temporal.date_encoder(),
    ColumnType.TIME: lambda c: temporal.time_encoder(),
    ColumnType.DATETIME: lambda c: temporal.datetime_encoder(),
    ColumnType.TIMESTAMP: lambda c: temporal.timestamp_encoder(),
    ColumnType.TIMESTAMP2: lambda c: temporal.timestamp2_encoder(c.meta),
    ColumnType.DATETIME2: lambda c: temporal.datetime2_encoder(c.meta),
    ColumnType.TIME2: lambda c: temporal.time2_encoder(c.meta),
    ColumnType.VARCHAR: lambda c: strings.varchar_encoder(c.meta, _codec(c)),
    ColumnType.VAR_STRING: lambda c: strings.string_encoder(c.meta, _codec(c)),
    ColumnType.STRING: lambda c: strings.string_encoder(c.meta, _codec(c)),
    ColumnType.ENUM: lambda c: strings.enum_encoder(c.meta & 0xFF, c.enum_values),
    ColumnType.SET: lambda c: strings.set_encoder(c.meta & 0xFF, c.set_values),
    ColumnType.BLOB: lambda c: strings.blob_encoder(c.meta, _codec(c)),
    ColumnType.TINY_BLOB: lambda c: strings.blob_encoder(c.meta or 1, _codec(c)),
    ColumnType.MEDIUM_BLOB: lambda c: strings.blob_encoder(c.meta or 3, _codec(c)),
    ColumnType.LONG_BLOB: lambda c: strings.blob_encoder(c.meta or 4, _codec(c)),
    ColumnType.GEOMETRY: lambda c: strings.blob_encoder(c.meta, None),
    ColumnType.JSON: lambda c: strings.json_encoder(c.meta),
    ColumnType.VECTOR: lambda c: strings.vector_encoder(c.meta),
    ColumnType.NULL: lambda c: lambda v: b"",
}


def column_encoder(col: ColumnDef) -> Encoder:
    """The inverse of ``column_decoder``: a value -> the bytes a row image holds for it."""
    factory = _ENCODER_FACTORIES.get(col.real_type)
    if factory is None:
        raise UnsupportedColumnType(f"column {col.label} has type {col.type_code} that binlogs do not carry")
    return factory(col)
