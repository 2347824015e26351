"""TABLE_MAP: a table id bound to db, table, column types and metadata, with MySQL 8 / MariaDB 10.5
optional metadata (names, signedness, charsets, ENUM/SET values, geometry types, keys, visibility)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from binlake.events.base import DecodeState, EventHeader
from binlake.values.columns import ColumnDef, column_decoder, column_encoder
from binlake.values.plan import layout_signature
from binlake.values.types import CHARACTER_TYPES, META_LAYOUT, NUMERIC_TYPES, ColumnType
from binlake.wire import Cursor, encode_lenenc

# Optional metadata field codes (Table_map_log_event::Optional_metadata_field_type)
OPT_SIGNEDNESS = 1
OPT_DEFAULT_CHARSET = 2
OPT_COLUMN_CHARSET = 3
OPT_COLUMN_NAME = 4
OPT_SET_STR_VALUE = 5
OPT_ENUM_STR_VALUE = 6
OPT_GEOMETRY_TYPE = 7
OPT_SIMPLE_PRIMARY_KEY = 8
OPT_PRIMARY_KEY_WITH_PREFIX = 9
OPT_ENUM_AND_SET_DEFAULT_CHARSET = 10
OPT_ENUM_AND_SET_COLUMN_CHARSET = 11
OPT_COLUMN_VISIBILITY = 12
OPT_VECTOR_DIMENSIONALITY = 13


# the per-map caches: they follow from the columns, are rebuilt on first use, never copied or pickled
_CACHES = ("_decoders", "_signature", "_encoders", "_row_plans")


@dataclass(slots=True)
class TableMap:
    table_id: int
    flags: int
    database: str
    table: str
    columns: list[ColumnDef]
    primary_key: list[int] = field(default_factory=list)
    primary_key_prefixes: dict[int, int] = field(default_factory=dict)
    has_optional_metadata: bool = False
    unknown_metadata: dict[int, bytes] = field(default_factory=dict)
    undecodable: str | None = None  # why rows of this table cannot be decoded from the binlog alone
    # how the optional metadata was laid out (so the event re-encodes as written)
    metadata_order: list[int] = field(default_factory=list)
    has_metadata_block: bool = True  # servers before 5.1.18 wrote no metadata and no NULL bitmap
    default_collation: int | None = None  # DEFAULT_CHARSET's default (else COLUMN_CHARSET was used)
    enum_default_collation: int | None = None
    _decoders: list[Any] | None = field(default=None, repr=False, compare=False)
    _signature: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    _encoders: list[Any] | None = field(default=None, repr=False, compare=False)
    _row_plans: dict[tuple[Any, ...], Any] | None = field(default=None, repr=False, compare=False)

    def replaced(self, **changes: Any) -> TableMap:
        """A copy with ``changes`` and none of the per-map caches (they follow from the columns)."""
        cleared: dict[str, Any] = dict.fromkeys(_CACHES)
        return dataclasses.replace(self, **changes, **cleared)

    def __getstate__(self) -> tuple[Any, ...]:
        """Pickled without the caches: generated decoders cannot be pickled (a checkpoint of the
        global merge and Spark's workers pickle table maps); they are rebuilt on first use."""
        return tuple(None if f.name in _CACHES else getattr(self, f.name) for f in dataclasses.fields(self))

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for f, value in zip(dataclasses.fields(self), state, strict=True):
            object.__setattr__(self, f.name, value)

    @property
    def row_plans(self) -> dict[tuple[Any, ...], Any]:
        """Generated row decoders by image layout (filled by the rows decoder)."""
        if self._row_plans is None:
            self._row_plans = {}
        return self._row_plans

    @property
    def decoders(self) -> list[Callable[[bytes, int], tuple[Any, int]]]:
        """One value decoder per column, built once per table map (the per-table decode plan)."""
        if self._decoders is None:
            self._decoders = [column_decoder(c) for c in self.columns]
        return self._decoders

    @property
    def encoders(self) -> list[Callable[[Any], bytes]]:
        """One value encoder per column (the writer's side of the decode plan)."""
        if self._encoders is None:
            self._encoders = [column_encoder(c) for c in self.columns]
        return self._encoders

    @property
    def signature(self) -> tuple[Any, ...]:
        """What decides how this table's values decode (equal for the same table in every transaction)."""
        if self._signature is None:
            self._signature = layout_signature(self.columns)
        return self._signature

    @property
    def json_columns(self) -> list[int]:
        return [c.index for c in self.columns if c.type_code == ColumnType.JSON]


def read_table_id(c: Cursor, post_header_len: int) -> int:
    return c.u32() if post_header_len == 6 else c.uint(6)


def _msb_bits(data: bytes, n: int) -> list[bool]:
    """Optional-metadata bitmaps are most-significant-bit first."""
    return [bool(data[i >> 3] & (0x80 >> (i & 7))) for i in range(min(n, len(data) * 8))]


def _lenenc_list(data: bytes) -> list[int]:
    c = Cursor(data)
    out = []
    while c.remaining:
        out.append(c.lenenc() or 0)
    return out


def _str_lists(data: bytes) -> list[list[str]]:
    c = Cursor(data)
    out = []
    while c.remaining:
        n = c.lenenc() or 0
        out.append([c.lenenc_bytes().decode("utf-8", "surrogateescape") for _ in range(n)])
    return out


def _default_charset(data: bytes) -> tuple[int, dict[int, int]]:
    """Default collation, then (n-th column of the kind, collation) pairs for the exceptions."""
    c = Cursor(data)
    default = c.lenenc() or 0
    exceptions = {}
    while c.remaining:
        i = c.lenenc() or 0
        exceptions[i] = c.lenenc() or 0
    return default, exceptions


def _apply_collations(cols: list[ColumnDef], data: bytes, per_column: bool) -> int | None:
    """Set each column's collation; returns the default collation when the default form was used."""
    if per_column:
        for col, coll in zip(cols, _lenenc_list(data), strict=False):
            col.collation = coll
        return None
    default, exceptions = _default_charset(data)
    for i, col in enumerate(cols):
        col.collation = exceptions.get(i, default)
    return default


def apply_optional_metadata(tm: TableMap, data: bytes, mariadb: bool = False) -> None:
    cols = tm.columns
    numeric = [c for c in cols if c.real_type in NUMERIC_TYPES]
    # MariaDB gives every column with a charset an entry (GEOMETRY is a binary BLOB there); MySQL not.
    char_types = CHARACTER_TYPES | {ColumnType.GEOMETRY} if mariadb else CHARACTER_TYPES
    character = [c for c in cols if c.real_type in char_types]
    enum_set = [c for c in cols if c.real_type in (ColumnType.ENUM, ColumnType.SET)]
    enums = [c for c in cols if c.real_type == ColumnType.ENUM]
    sets = [c for c in cols if c.real_type == ColumnType.SET]
    geoms = [c for c in cols if c.real_type == ColumnType.GEOMETRY]
    vectors = [c for c in cols if c.real_type == ColumnType.VECTOR]
    c = Cursor(data)
    while c.remaining:
        kind = c.u8()
        value = c.take(c.lenenc() or 0)
        tm.metadata_order.append(kind)
        if kind == OPT_SIGNEDNESS:
            for col, unsigned in zip(numeric, _msb_bits(value, len(numeric)), strict=False):
                col.unsigned = unsigned
        elif kind == OPT_DEFAULT_CHARSET:
            tm.default_collation = _apply_collations(character, value, per_column=False)
        elif kind == OPT_COLUMN_CHARSET:
            _apply_collations(character, value, per_column=True)
        elif kind == OPT_ENUM_AND_SET_DEFAULT_CHARSET:
            tm.enum_default_collation = _apply_collations(enum_set, value, per_column=False)
        elif kind == OPT_ENUM_AND_SET_COLUMN_CHARSET:
            _apply_collations(enum_set, value, per_column=True)
        elif kind == OPT_COLUMN_NAME:
            vc = Cursor(value)
            for col in cols:
                if not vc.remaining:
                    break
                col.name = vc.lenenc_bytes().decode("utf-8", "surrogateescape")
        elif kind == OPT_SET_STR_VALUE:
            for col, names in zip(sets, _str_lists(value), strict=False):
                col.set_values = names
        elif kind == OPT_ENUM_STR_VALUE:
            for col, names in zip(enums, _str_lists(value), strict=False):
                col.enum_values = names
        elif kind == OPT_GEOMETRY_TYPE:
            for col, g in zip(geoms, _lenenc_list(value), strict=False):
                col.geometry_type = g
        elif kind == OPT_SIMPLE_PRIMARY_KEY:
            tm.primary_key = _lenenc_list(value)
        elif kind == OPT_PRIMARY_KEY_WITH_PREFIX:
            pairs = _lenenc_list(value)
            tm.primary_key = pairs[0::2]
            tm.primary_key_prefixes = {i: p for i, p in zip(pairs[0::2], pairs[1::2], strict=False) if p}
        elif kind == OPT_COLUMN_VISIBILITY:
            for col, vis in zip(cols, _msb_bits(value, len(cols)), strict=False):
                col.visible = vis
        elif kind == OPT_VECTOR_DIMENSIONALITY:
            for col, d in zip(vectors, _lenenc_list(value), strict=False):
                col.vector_dimension = d
        else:
            tm.unknown_metadata[kind] = value
    for i in tm.primary_key:
        if i >= len(cols):
            raise ValueError(f"primary key names column {i} of a {len(cols)}-column table")
        cols[i].in_primary_key = True
    tm.has_optional_metadata = True


def decode_table_map(buf: bytes, state: DecodeState, header: EventHeader) -> TableMap:
    fde = state.fde
    post = fde.post_header_len(header.type_code, 8) if fde else 8
    c = Cursor(buf)
    table_id = read_table_id(c, post)
    flags = c.u16()
    database = c.take(c.u8()).decode("utf-8", "surrogateescape")
    c.skip(1)
    table = c.take(c.u8()).decode("utf-8", "surrogateescape")
    c.skip(1)
    ncols = c.lenenc() or 0
    types = c.take(ncols)
    # Servers before 5.1.18 wrote neither the metadata block nor the NULL bitmap: the values of
    # columns that need metadata (strings, decimals, …) can then not be decoded from the binlog alone.
    has_meta = bool(c.remaining)
    meta_block = Cursor(c.take(c.lenenc() or 0) if has_meta else b"")
    metas = []
    missing_meta = False
    for t in types:
        size, order = META_LAYOUT.get(t, (0, "little"))
        if size and not has_meta:
            missing_meta = True
            metas.append(0)
        else:
            metas.append(int.from_bytes(meta_block.take(size), order) if size else 0)  # type: ignore[arg-type]
    nullable = c.bitmap(ncols) if c.remaining else (1 << ncols) - 1
    cols = [ColumnDef(i, types[i], metas[i], bool(nullable >> i & 1)) for i in range(ncols)]
    tm = TableMap(table_id, flags, database, table, cols)
    tm.has_metadata_block = has_meta
    if missing_meta:
        tm.undecodable = "the table map carries no column metadata (server before 5.1.18)"
    if c.remaining:
        apply_optional_metadata(tm, c.rest(), mariadb=bool(fde and fde.is_mariadb))
    return tm


# ---- encoder ------------------------------------------------------------------------------------


def _msb_bitmap(bits: list[bool]) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, b in enumerate(bits):
        if b:
            out[i >> 3] |= 0x80 >> (i & 7)
    return bytes(out)


def _lenenc_ints(values: list[int]) -> bytes:
    return b"".join(encode_lenenc(v) for v in values)


def _str_list(names: list[str]) -> bytes:
    out = encode_lenenc(len(names))
    for n in names:
        raw = n.encode("utf-8", "surrogateescape")
        out += encode_lenenc(len(raw)) + raw
    return out


def _collations(cols: list[ColumnDef], default: int | None) -> bytes:
    if default is None:
        return _lenenc_ints([c.collation or 0 for c in cols])
    out = encode_lenenc(default)
    for i, c in enumerate(cols):
        if c.collation != default:
            out += encode_lenenc(i) + encode_lenenc(c.collation or 0)
    return out


def _most_common(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(set(known), key=known.count) if known else None


def optional_metadata_fields(tm: TableMap, mariadb: bool = False) -> dict[int, bytes]:
    """Each optional-metadata field the table's columns call for, keyed by field code."""
    cols = tm.columns
    numeric = [c for c in cols if c.real_type in NUMERIC_TYPES]
    char_types = CHARACTER_TYPES | {ColumnType.GEOMETRY} if mariadb else CHARACTER_TYPES
    character = [c for c in cols if c.real_type in char_types]
    enum_set = [c for c in cols if c.real_type in (ColumnType.ENUM, ColumnType.SET)]
    out: dict[int, bytes] = {}
    if numeric and any(c.unsigned is not None for c in numeric):
        out[OPT_SIGNEDNESS] = _msb_bitmap([bool(c.unsigned) for c in numeric])
    if character and any(c.collation is not None for c in character):
        default = (
            tm.default_collation
            if OPT_DEFAULT_CHARSET in tm.metadata_order or not tm.metadata_order
            else None
        )
        if default is None and not tm.metadata_order:
            default = _most_common([c.collation for c in character])
        out[OPT_DEFAULT_CHARSET if default is not None else OPT_COLUMN_CHARSET] = _collations(
            character, default
        )
    if any(c.name is not None for c in cols):
        out[OPT_COLUMN_NAME] = b"".join(
            encode_lenenc(len(n)) + n
            for n in ((c.name or "").encode("utf-8", "surrogateescape") for c in cols)
        )
    sets = [c for c in cols if c.real_type == ColumnType.SET and c.set_values is not None]
    if sets:
        out[OPT_SET_STR_VALUE] = b"".join(_str_list(c.set_values or []) for c in sets)
    enums = [c for c in cols if c.real_type == ColumnType.ENUM and c.enum_values is not None]
    if enums:
        out[OPT_ENUM_STR_VALUE] = b"".join(_str_list(c.enum_values or []) for c in enums)
    geoms = [c for c in cols if c.real_type == ColumnType.GEOMETRY and c.geometry_type is not None]
    if geoms:
        out[OPT_GEOMETRY_TYPE] = _lenenc_ints([c.geometry_type or 0 for c in geoms])
    if tm.primary_key:
        if tm.primary_key_prefixes or OPT_PRIMARY_KEY_WITH_PREFIX in tm.metadata_order:
            out[OPT_PRIMARY_KEY_WITH_PREFIX] = b"".join(
                encode_lenenc(i) + encode_lenenc(tm.primary_key_prefixes.get(i, 0)) for i in tm.primary_key
            )
        else:
            out[OPT_SIMPLE_PRIMARY_KEY] = _lenenc_ints(tm.primary_key)
    if enum_set and any(c.collation is not None for c in enum_set):
        default = (
            tm.enum_default_collation
            if OPT_ENUM_AND_SET_DEFAULT_CHARSET in tm.metadata_order or not tm.metadata_order
            else None
        )
        if default is None and not tm.metadata_order:
            default = _most_common([c.collation for c in enum_set])
        key = OPT_ENUM_AND_SET_DEFAULT_CHARSET if default is not None else OPT_ENUM_AND_SET_COLUMN_CHARSET
        out[key] = _collations(enum_set, default)
    if any(c.visible is not None for c in cols):
        out[OPT_COLUMN_VISIBILITY] = _msb_bitmap([c.visible is not False for c in cols])
    vectors = [c for c in cols if c.real_type == ColumnType.VECTOR and c.vector_dimension is not None]
    if vectors:
        out[OPT_VECTOR_DIMENSIONALITY] = _lenenc_ints([c.vector_dimension or 0 for c in vectors])
    out.update(tm.unknown_metadata)
    return out


def encode_table_map(tm: TableMap, table_id_width: int = 6, mariadb: bool = False) -> bytes:
    out = bytearray(tm.table_id.to_bytes(table_id_width, "little") + tm.flags.to_bytes(2, "little"))
    for ident in (tm.database, tm.table):
        raw = ident.encode("utf-8", "surrogateescape")
        out += bytes([len(raw)]) + raw + b"\0"
    out += encode_lenenc(len(tm.columns)) + bytes(c.type_code for c in tm.columns)
    if not tm.has_metadata_block:  # a pre-5.1.18 table map: neither metadata nor NULL bitmap
        return bytes(out)
    metas = bytearray()
    for c in tm.columns:
        size, byteorder = META_LAYOUT.get(c.type_code, (0, "little"))
        if size:
            metas += c.meta.to_bytes(size, byteorder)  # type: ignore[arg-type]
    out += encode_lenenc(len(metas)) + metas
    nulls = sum(1 << c.index for c in tm.columns if c.nullable)
    out += nulls.to_bytes((len(tm.columns) + 7) // 8, "little")
    if tm.has_optional_metadata or tm.metadata_order:
        fields = optional_metadata_fields(tm, mariadb)
        order = tm.metadata_order or sorted(fields)
        for kind in order:
            if kind in fields:
                out += bytes([kind]) + encode_lenenc(len(fields[kind])) + fields[kind]
    return bytes(out)
