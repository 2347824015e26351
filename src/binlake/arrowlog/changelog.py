"""The change log as Arrow record batches: one row per change, one schema for every table, typed.

``order_key`` is ``OrderKey.encode()`` (35 bytes whose byte order is commit order, for a file series
and the global binlog alike); ``before``/``after`` are VARIANT objects column name -> typed value
(``binlake.arrowlog.images``), ``pk``/``pk_before`` the same for the primary key's columns;
``columns`` the table's layout as a list of structs. Rename and drop changes carry their names in
``before``/``after`` (``{"db", "table"}``, or ``{"column"}``) and no layout or key. Read with
``ColumnsOnce`` the batches have one more field, ``layout`` (a number per layout, the same in every
process), and a row change carries its ``columns`` only where it is the first of its layout.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from binlake.arrowlog import compact, variant
from binlake.arrowlog.images import LayoutImages, _fastvariant, image_cache, use_compiled_images
from binlake.changes import (
    Layout,
    Op,
    RowChange,
    _file_name,
    _layouts,
    file_number,
    row_changes,
    settle_partial_json,
)
from binlake.decoder import decoded
from binlake.events.base import Event
from binlake.events.rows import NOT_ASKED, Rows
from binlake.txn import DDL, Transaction, TransactionGrouper

# a VARIANT column as Spark's Python data source takes it from Arrow
VARIANT = pa.struct(
    [
        pa.field("value", pa.binary(), nullable=False, metadata={b"variant": b"true"}),
        pa.field("metadata", pa.binary(), nullable=False, metadata={b"variant": b"true"}),
    ]
)
COLUMN = pa.struct(
    [
        pa.field("name", pa.string()),
        pa.field("type", pa.int32()),
        pa.field("meta", pa.int32()),
        pa.field("unsigned", pa.bool_()),
        pa.field("collation", pa.int32()),
        pa.field("pk", pa.bool_()),
        pa.field("values", pa.list_(pa.string())),
    ]
)
CHANGELOG_FIELDS: list[tuple[str, pa.DataType]] = [
    ("source", pa.string()),
    ("file", pa.string()),
    ("file_number", pa.int64()),
    ("position", pa.int64()),
    ("txn_position", pa.int64()),
    ("order_key", pa.binary()),
    ("gtid", pa.string()),
    ("last_committed", pa.int64()),
    ("sequence_number", pa.int64()),
    ("commit_ts", pa.timestamp("us", tz="UTC")),
    ("server_id", pa.int64()),
    ("db", pa.string()),
    ("table", pa.string()),
    ("op", pa.string()),
    ("before", VARIANT),
    ("after", VARIANT),
    ("pk", VARIANT),
    ("pk_before", VARIANT),
    ("columns", pa.list_(COLUMN)),
]
CHANGELOG_SCHEMA = pa.schema(CHANGELOG_FIELDS)
SPARK_DDL = (
    "source STRING, file STRING, file_number BIGINT, position BIGINT, txn_position BIGINT, order_key BINARY, "
    "gtid STRING, last_committed BIGINT, sequence_number BIGINT, commit_ts TIMESTAMP, server_id BIGINT, "
    "db STRING, `table` STRING, op STRING, before VARIANT, after VARIANT, pk VARIANT, pk_before VARIANT, "
    "columns ARRAY<STRUCT<name: STRING, type: INT, meta: INT, unsigned: BOOLEAN, collation: INT, pk: BOOLEAN, "
    "values: ARRAY<STRING>>>"
)
LAYOUT_FIELD = pa.field("layout", pa.int64())
ONCE_SCHEMA = CHANGELOG_SCHEMA.append(LAYOUT_FIELD)  # the batches read with ``ColumnsOnce``
_NAME_FIELDS = {
    Op.RENAME_TABLE: ("db", "table"),
    Op.DROP_TABLE: ("db", "table"),
    Op.RENAME_COLUMN: ("column",),
}
_UTC = dt.UTC


def columns_value(layout: Layout) -> list[dict[str, Any]]:
    """A layout as the ``columns`` field holds it."""
    return [
        {
            "name": c.name, "type": c.type, "meta": c.meta, "unsigned": c.unsigned, "collation": c.collation,
            "pk": c.pk, "values": list(c.values) if c.values is not None else None,
        }
        for c in layout
    ]  # fmt: skip


def layout_id(layout: Layout) -> int:
    """A layout's number: a 64-bit hash of its ``columns`` value, the same in every process (the
    tasks that read a series' ranges each number the layouts they meet, with no word between them)."""
    text = json.dumps(columns_value(layout), separators=(",", ":"))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)


class ColumnsOnce:
    """The ``columns`` of one read (a range of a file) written once per layout: a row change carries
    them where it is the read's first of its layout, else NULL, and every change its ``layout``
    number. A reader that keeps a batch pays for every value it holds, and a layout is a list of
    tens of structs on every row; the head of a batch then finds each layout's columns by number."""

    def __init__(self) -> None:
        self._ids: dict[Layout, int] = {}
        self._sent: set[int] = set()

    def number(self, layout: Layout) -> int:
        got = self._ids.get(layout)
        if got is None:
            got = self._ids[layout] = layout_id(layout)
        return got

    def arrays(
        self, distinct: list[Layout], which: list[int | None], ops: pa.Array, compiled: bool = False
    ) -> list[pa.Array]:
        """The ``columns`` and ``layout`` fields of a batch whose rows are of layouts ``distinct[i]``
        for ``i`` in ``which`` (None: a rename or drop) and of ``ops`` (``compiled``: as in
        ``_columns``)."""
        numbers = [self.number(lay) for lay in distinct]
        kept = list(which)
        for row, (i, is_row) in enumerate(
            zip(which, pc.is_in(ops, compact.ROW_OP_VALUES).to_pylist(), strict=True)
        ):
            if i is None or not is_row:
                continue
            if numbers[i] in self._sent:
                kept[row] = None
            else:
                self._sent.add(numbers[i])
        index = pa.array(which, pa.int32())
        return [_columns(distinct, kept, len(which), compiled), pa.array(numbers, pa.int64()).take(index)]


@dataclass
class Trim:
    """What a read leaves out of the change log (the ``binlog`` source's ``columns``, ``before`` and
    ``changes`` options; a sync reads with all three): ``once``, each layout's columns once per read
    and a ``layout`` number on every row (``ColumnsOnce``); not ``keyed_before``, a keyed change's
    ``before`` image (its key is ``pk_before``; only a keyless table's change is found by its before
    image); ``last``, every change but the last per key (``binlake.arrowlog.compact``)."""

    once: ColumnsOnce | None = None
    keyed_before: bool = True
    last: bool = False

    @property
    def schema(self) -> pa.Schema:
        """The schema of the batches the builders make."""
        return CHANGELOG_SCHEMA if self.once is None else ONCE_SCHEMA

    @property
    def read_schema(self) -> pa.Schema:
        """The schema of the batches a read yields (``batches``)."""
        return compact.compacted_schema(self.schema) if self.last else self.schema

    @property
    def spark_ddl(self) -> str:
        """``read_schema`` as a Spark DDL string."""
        once = ", layout BIGINT" if self.once is not None else ""
        return SPARK_DDL + once + (", changes INT, partial BOOLEAN, json_edits BOOLEAN" if self.last else "")

    def batches(
        self, built: Iterable[pa.RecordBatch], suspects: Collection[int] | None = None
    ) -> Iterable[pa.RecordBatch]:
        """What a read yields of the batches the builders made with this trim (``suspects``: as
        in ``compact.last_per_key``)."""
        return compact.last_per_key(built, self.schema, suspects=suspects) if self.last else built


class _Variants:
    """One VARIANT column being filled (the pure path; ``_fastvariant.VariantColumn`` is the
    compiled one, with the same methods, writing into buffers)."""

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.metas: list[bytes] = []
        self.nulls: list[bool] = []

    def add(self, encoder: Any, row: Any) -> None:
        """``row`` encoded by ``encoder`` (an ``ObjectEncoder``); None: a NULL variant."""
        if row is None:
            self.add_null()
        else:
            self.add_bytes(encoder(row), encoder.metadata)

    def add_bytes(self, value: bytes, metadata: bytes) -> None:
        self.values.append(value)
        self.metas.append(metadata)
        self.nulls.append(False)

    def add_null(self) -> None:
        self.values.append(b"")
        self.metas.append(b"")
        self.nulls.append(True)

    def array(self, type: pa.DataType) -> pa.StructArray:
        return pa.StructArray.from_arrays(
            [pa.array(self.values, pa.binary()), pa.array(self.metas, pa.binary())],
            fields=list(type),
            mask=pa.array(self.nulls, pa.bool_()),
        )


def changelog_batches(
    changes: Iterable[RowChange],
    size: int = 4096,
    compiled: bool | None = None,
    trim: Trim | None = None,
) -> Iterator[pa.RecordBatch]:
    """Row changes as change-log record batches of up to ``size`` rows (``compiled``: built by the
    compiled encoder, default when built and chosen; the pure one is the reference). ``trim``: what
    the batches leave out (``Trim``)."""
    on = use_compiled_images(compiled)
    images = image_cache(on)
    if on:
        yield from _fast_batches(changes, size, images, trim)
        return
    buf: list[RowChange] = []
    for c in changes:
        buf.append(c)
        if len(buf) >= size:
            yield _batch(buf, images, trim=trim)
            buf = []
    if buf:
        yield _batch(buf, images, trim=trim)


def transaction_batches(
    transactions: Iterable[Transaction],
    source: str = "",
    size: int = 4096,
    compiled: bool | None = None,
    trim: Trim | None = None,
) -> Iterator[pa.RecordBatch]:
    """The change log of finished transactions: ``changelog_batches`` of their ``row_changes``
    (the reference, taken when not ``compiled``), the compiled way in one pass: a transaction's rows
    go from the rows events straight into the batch's buffers, without a ``RowChange`` per row —
    from their bytes, without a Python value per column, where they were read with row decoding
    off (``BatchBuilder.add_transaction``; the rest are decoded first), the plain ones one after
    the other in one compiled call (``add_transactions``). A DDL transaction (its renames and
    drops), and the rest of one whose change the one pass does not take, go change by change: the
    same rows in the same order. ``trim``: as in ``changelog_batches``."""
    on = use_compiled_images(compiled)
    if not on:
        yield from changelog_batches(
            (c for t in transactions for c in row_changes(decoded_rows(t), None, source)),
            size,
            compiled=False,
            trim=trim,
        )
        return
    fill = _Filler(size, image_cache(True), trim)
    it = iter(transactions)
    while True:
        at = _fastvariant.Cursor()  # type: ignore[union-attr]
        held: list[pa.RecordBatch] = []  # batches of ``t``'s first changes, given once ``t`` reads whole
        if fill.pure is None:
            # the plain transactions in one call, up to one that is not taken whole
            t, status = fill.builder.add_transactions(it, source, at, size, *_MODEL)
            if t is None:
                break
            if status == _OTHER and t.kind != DDL:
                settle_partial_json(t)
                status = fill.builder.add_transaction(t, source, at, size, *_MODEL)
            while status == _FULL:
                held.extend(fill.flush())
                status = fill.builder.add_transaction(t, source, at, size, *_MODEL)
            if status == _ALL:
                yield from held
                continue
        elif (t := next(it, None)) is None:
            break
        # decoded before a batch holding any of ``t`` is given: damage the one pass met in a rows event
        # (its bytes, a value that does not decode) raises here, as reading with decoding on raises
        # before ``t`` is whole
        rest = row_changes(decoded_rows(t), None, source)
        yield from held
        yield from fill.changes(itertools.islice(rest, at.taken, None))
    yield from fill.finish()


def decoded_rows(t: Transaction) -> Transaction:
    """``t`` with the rows of its events read with row decoding off decoded (``decoder.decoded``:
    damage raises the error reading with decoding on raises): what ``row_changes`` reads."""
    if any(type(e.body) is Rows and e.body.undecoded_reason == NOT_ASKED for e in t.events):
        t.events = [decoded(e) for e in t.events]
    return t


def fed(
    events: Iterable[Event], file_seq: int, grouper: TransactionGrouper, compiled: bool | None = None
) -> Iterator[Transaction]:
    """What ``grouper.feed(file_seq, ev)`` returns for each of ``events``, in order (unfinished
    transactions included); ``compiled`` (default: when the compiled change log is chosen): the
    common events of a transaction grouped by ``_fastvariant.Grouper``, the rest by ``grouper``."""
    if not use_compiled_images(compiled):
        for ev in events:
            yield from grouper.feed(file_seq, ev)
        return
    assert _fastvariant is not None
    fast, it = _fastvariant.Grouper(grouper), iter(events)
    try:
        while (done := fast.pull(it, file_seq)) is not None:
            yield from done
    finally:  # left before the end: ``grouper`` says where its open transaction ends
        fast.sync()


# ``BatchBuilder.add_transaction``'s status (2: a change it does not take); ``_OTHER``:
# ``add_transactions`` left a transaction to the caller (DDL, or partial JSON to settle first)
_ALL, _FULL, _OTHER = 0, 1, 3
_MODEL = (_layouts, file_number, _file_name)  # what the builder takes of the change model


class _Filler:
    """Batches of up to ``size`` changes by the compiled builder; a change it does not take
    (``_fastvariant.Misfit``, or an encoder's error) ends the batch before it and starts one built
    the pure way, which gives its rows or raises the reference's error: the same rows in the same
    order, batch boundaries moved."""

    def __init__(self, size: int, images: Callable[[Layout], LayoutImages], trim: Trim | None = None) -> None:
        assert _fastvariant is not None
        self.size, self.images, self.trim = size, images, trim
        self.tables: dict[int, Any] = {}  # the builders' table maps, found once per pass
        self.builder = self._builder()
        self.pure: list[RowChange] | None = None  # a batch being gathered for the pure builder

    def flush(self) -> Iterator[pa.RecordBatch]:
        """The compiled builder's batch, and a new builder."""
        if self.builder.rows:
            yield _built(self.builder, self.trim)
            self.builder = self._builder()

    def _builder(self) -> Any:
        assert _fastvariant is not None
        builder = _fastvariant.BatchBuilder(self.images, _name_images, self.tables)
        builder.keyed_before = self.trim is None or self.trim.keyed_before
        return builder

    def changes(self, changes: Iterable[RowChange]) -> Iterator[pa.RecordBatch]:
        for c in changes:
            if self.pure is not None:
                self.pure.append(c)
                if len(self.pure) >= self.size:
                    yield _batch(self.pure, self.images, _fastvariant.VariantColumn, self.trim)  # type: ignore[union-attr]
                    self.pure = None
                continue
            try:
                self.builder.add(c)
            except Exception:
                yield from self.flush()
                self.pure = [c]
                continue
            if self.builder.rows >= self.size:
                yield from self.flush()

    def finish(self) -> Iterator[pa.RecordBatch]:
        if self.pure:
            yield _batch(self.pure, self.images, _fastvariant.VariantColumn, self.trim)  # type: ignore[union-attr]
        yield from self.flush()


def _fast_batches(
    changes: Iterable[RowChange],
    size: int,
    images: Callable[[Layout], LayoutImages],
    trim: Trim | None = None,
) -> Iterator[pa.RecordBatch]:
    """``changelog_batches`` by the compiled builder, change by change (``_Filler``)."""
    fill = _Filler(size, images, trim)
    yield from fill.changes(changes)
    yield from fill.finish()


def _built(builder: Any, trim: Trim | None = None) -> pa.RecordBatch:
    arrays = builder.arrays(CHANGELOG_FIELDS)
    return _record(arrays, builder.distinct, builder.which, trim, compiled=True)


_OP = [name for name, _ in CHANGELOG_FIELDS].index("op")


def _record(
    arrays: list[pa.Array],
    distinct: list[Layout],
    which: list[int | None],
    trim: Trim | None,
    compiled: bool = False,
) -> pa.RecordBatch:
    """A change-log batch from its fields before ``columns`` and its rows' layouts (``compiled``:
    ``columns`` as ``_columns`` builds it)."""
    once = None if trim is None else trim.once
    if once is None:
        cols = _columns(distinct, which, len(which), compiled)
        return pa.RecordBatch.from_arrays([*arrays, cols], schema=CHANGELOG_SCHEMA)
    return pa.RecordBatch.from_arrays(
        [*arrays, *once.arrays(distinct, which, arrays[_OP], compiled)], schema=ONCE_SCHEMA
    )


def _name_images(c: RowChange) -> tuple[tuple[bytes, bytes] | None, tuple[bytes, bytes] | None]:
    """A rename's or drop's ``before`` and ``after``: its names as a variant object each."""
    fields = _NAME_FIELDS[c.op]
    return tuple(  # type: ignore[return-value]
        None if names is None else variant.encode_document(dict(zip(fields, names, strict=True)))
        for names in (c.before, c.after)
    )


def _columns(distinct: list[Layout], which: list[int | None], n: int, compiled: bool = False) -> pa.Array:
    """The ``columns`` field: each distinct layout once, taken per change (the reference), or
    ``compiled``: each layout's buffers copied per change (``_fastvariant.columns_array``)."""
    if not distinct:
        return pa.nulls(n, pa.list_(COLUMN))
    values = [columns_value(lay) for lay in distinct]
    if compiled:
        return _fastvariant.columns_array(values, which, pa.list_(COLUMN))  # type: ignore[union-attr]
    return pa.array(values, pa.list_(COLUMN)).take(pa.array(which, pa.int32()))


def _batch(
    changes: list[RowChange],
    images: Callable[[Layout], LayoutImages],
    column: Callable[[], Any] = _Variants,
    trim: Trim | None = None,
) -> pa.RecordBatch:
    """The reference: one record batch of ``changes``, each field from a Python list."""
    before, after, pk, pk_before = column(), column(), column(), column()
    layouts: dict[int, int] = {}  # id(layout) -> index into distinct
    distinct: list[Layout] = []
    which: list[int | None] = []
    for c in changes:
        layout = c.layout
        if layout is None:  # a rename or drop: names, no layout, no key
            for col, doc in zip((before, after), _name_images(c), strict=True):
                if doc is None:
                    col.add_null()
                else:
                    col.add_bytes(*doc)
            pk.add_null()
            pk_before.add_null()
            which.append(None)
            continue
        enc = images(layout)
        img, key = enc.image, enc.key
        before.add(img, c.before if trim is None or trim.keyed_before or c.key is None else None)
        after.add(img, c.after)
        pk.add(key, c.key)
        pk_before.add(key, c.key_before)
        i = layouts.get(id(layout))
        if i is None:
            i = layouts[id(layout)] = len(distinct)
            distinct.append(layout)
        which.append(i)
    origins = [c.origin for c in changes]
    arrays = [
        pa.array([o.source for o in origins], pa.string()),
        pa.array([c.file for c in changes], pa.string()),
        pa.array([o.file_number for o in origins], pa.int64()),
        pa.array([c.position for c in changes], pa.int64()),
        pa.array([o.txn_position for o in origins], pa.int64()),
        pa.array([c.order_key.encode() for c in changes], pa.binary()),
        pa.array([o.gtid for o in origins], pa.string()),
        pa.array([o.last_committed for o in origins], pa.int64()),
        pa.array([o.sequence_number for o in origins], pa.int64()),
        pa.array([o.commit_time_us for o in origins], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([c.server_id for c in changes], pa.int64()),
        pa.array([c.db for c in changes], pa.string()),
        pa.array([c.table for c in changes], pa.string()),
        pa.array([c.op.value for c in changes], pa.string()),
        before.array(VARIANT),
        after.array(VARIANT),
        pk.array(VARIANT),
        pk_before.array(VARIANT),
    ]
    return _record(arrays, distinct, which, trim, compiled=column is not _Variants)


def rows_of(batch: pa.RecordBatch | pa.Table) -> list[dict[str, Any]]:
    """Change-log rows as Python dicts, variants decoded (``binlake.arrowlog.variant.decode``): for
    tests and users reading a change log outside Spark."""
    out = batch.to_pylist()
    for r in out:
        for k in ("before", "after", "pk", "pk_before"):
            if r[k] is not None:
                r[k] = variant.decode(r[k]["value"], r[k]["metadata"])
    return out
