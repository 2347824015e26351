"""Row changes: the typed change model every consumer shares (the Spark change log, the sinks, the
global binlog), with no Spark and no JSON in it.

A ``RowChange`` is one row of a rows event — or one rename/drop a DDL statement makes — with its
images as tuples of the decoded Python values (README "Value semantics"; ``ABSENT`` where a
MINIMAL/NOBLOB image does not carry a column), the table's ``Layout``, where it comes from and its
``OrderKey``.

``OrderKey`` is the one order of changes, for a file series and for the global binlog alike, with ONE
fixed-width binary encoding (``encode``) whose byte order is its order, so a BINARY column sorts it
right anywhere. Layout of the 35 bytes, every integer unsigned big-endian:

====== ====== ====================================================================================
offset width  field
====== ====== ====================================================================================
0      8      ``major``: file number in the series | commit TSO (global binlog)
8      8      ``minor``: offset of the transaction's first event | transaction id (global binlog)
16     4      ``seq``: 0 | the vtso's sequence after that TSO commit (global binlog)
20     6      ``node``: 6 zero bytes | the vtso's node id, ASCII, right-aligned with "0" (global)
26     4      ``event``: index of the event in the transaction
30     4      ``row``: index of the change in the event (rows of a rows event; renames of a DDL)
34     1      ``part``: 0 the tombstone of a primary key an update moved away, 1 the change itself
====== ====== ====================================================================================

so ``(major, minor, seq, node)`` is the transaction's place (``(file, offset)`` of a series; the
virtual TSO of ``binlake.globalbinlog.vtso``), then the change's place inside it, then the
sub-order sinks need when an update changes a primary key (delete the old key, then write the row).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from binlake.columnfill import UnknownFill, column_fill
from binlake.decoder import decoded
from binlake.events.base import Event
from binlake.events.query import Query
from binlake.events.rows import ABSENT, PartialJson, Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.identitycache import IdentityCache
from binlake.layout import Column, Layout
from binlake.schema.renames import ColumnAdd, TableDrop, TableRename, renames_in
from binlake.statements import took_whole_effect
from binlake.txn import DDL, Transaction
from binlake.values.json_binary import Json
from binlake.values.json_edits import apply_edits
from binlake.values.types import ColumnType


class Op(StrEnum):
    """What a change does: a row change, or a name change DDL makes that sinks follow."""

    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    RENAME_TABLE = "rename_table"
    RENAME_COLUMN = "rename_column"
    DROP_TABLE = "drop_table"
    ADD_COLUMN = "add_column"  # every row the table held gets the new column's value (``after``)


ROW_OPS = (Op.INSERT, Op.UPDATE, Op.DELETE)
NAME_OPS = (Op.RENAME_TABLE, Op.RENAME_COLUMN, Op.DROP_TABLE)
SCHEMA_OPS = (*NAME_OPS, Op.ADD_COLUMN)  # the changes a DDL statement makes
_OPS = {op.value: op for op in Op}

TOMBSTONE, CHANGE = 0, 1  # OrderKey.part
NO_NODE = bytes(6)
_KEY = struct.Struct(">QQI6sIIB")
KEY_WIDTH = _KEY.size  # 35


class OrderKey(NamedTuple):
    """A change's place in commit order (see the module docstring for fields and encoding)."""

    major: int
    minor: int
    seq: int = 0
    node: bytes = NO_NODE
    event: int = 0
    row: int = 0
    part: int = CHANGE

    def encode(self) -> bytes:
        """The fixed-width bytes whose order is this key's order."""
        if len(self.node) != len(NO_NODE):  # struct would pad or cut it silently
            raise ValueError(f"order key out of range: {self!r} (node is not {len(NO_NODE)} bytes)")
        try:
            return _KEY.pack(*self)
        except struct.error as e:
            raise ValueError(f"order key out of range: {self!r} ({e})") from None

    @classmethod
    def decode(cls, data: bytes) -> OrderKey:
        return cls(*_KEY.unpack(data))

    def at(self, event: int, row: int) -> OrderKey:
        """The key of change ``row`` of event ``event`` in this key's transaction."""
        return _new_key(OrderKey, (self[0], self[1], self[2], self[3], event, row, CHANGE))

    def tombstone(self) -> OrderKey:
        """Sorts just before this change: the delete of the old key of a primary-key update."""
        return self._replace(part=TOMBSTONE)

    @classmethod
    def of_vtso(cls, tso: int, txn_id: int, seq: int, node: str, event: int = 0, row: int = 0) -> OrderKey:
        """A global binlog's key: the parts of a virtual TSO (``binlake.globalbinlog.vtso.parse``)."""
        return cls(tso, txn_id, seq, node.rjust(6, "0").encode("ascii"), event, row)


_new_key = tuple.__new__  # a key from its fields, without NamedTuple's keyword handling (hot path)
_NUMBER = re.compile(r"\.(\d+)$")


@functools.lru_cache(maxsize=1024)
def file_number(path: str | Path) -> int:
    """The sequence number a binlog file's name ends with (``mysql-bin.000042`` -> 42; else 0)."""
    m = _NUMBER.search(str(path))
    return int(m.group(1)) if m else 0


def layout_of(tm: TableMap) -> Layout:
    """The columns of a table map (names, types, signedness, charsets, key, ENUM/SET values)."""
    pk = set(tm.primary_key)
    out = []
    for c in tm.columns:
        t = c.real_type
        values = c.enum_values if t == ColumnType.ENUM else c.set_values if t == ColumnType.SET else None
        out.append(
            Column(
                c.label, t, c.meta, c.unsigned, c.collation, c.index in pk,
                tuple(values) if values is not None else None,
            )
        )  # fmt: skip
    return tuple(out)


# layouts by table map, kept across transactions (see ``binlake.identitycache``)
_layouts: IdentityCache[TableMap, Layout] = IdentityCache(layout_of)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a transaction comes from, shared by its changes. ``txn_position``: offset of its first
    event (global binlog: its rank in the merged stream); ``gtid``: its GTID (global: the vtso)."""

    source: str
    file_number: int
    txn_position: int
    gtid: str | None
    last_committed: int | None
    sequence_number: int | None
    commit_time_us: int | None  # None: unknown


class RowChange(NamedTuple):
    """One change (a named tuple: immutable, and built four times faster than a frozen dataclass,
    which counts at a few hundred thousand changes a second). Row ops: ``before``/``after`` images (None where the op has none), ``key`` the
    primary key values in column order (of ``after``, else of ``before``; None without a key or when the image does
    not carry it), ``key_before`` an update's old key. Name ops: ``db``/``table`` the table named
    before the statement; ``before``/``after`` ``(db, table)`` for rename_table and drop_table (no
    after), ``(column,)`` for rename_column; no layout or key."""

    op: Op
    db: str
    table: str
    before: tuple[Any, ...] | None
    after: tuple[Any, ...] | None
    key: tuple[Any, ...] | None
    key_before: tuple[Any, ...] | None
    layout: Layout | None
    origin: Origin
    file: str  # the binlog file's name ("global" for the global binlog)
    position: int  # offset of the event
    server_id: int
    order_key: OrderKey


Keep = Callable[[Event], bool]
KeepTable = Callable[[str, str], bool]


def row_changes(t: Transaction, selection: Any | None = None, source: str = "") -> Iterator[RowChange]:
    """The changes of one finished transaction in order. ``selection`` (``binlake.filters.Selection``
    or alike): the events and tables kept (the transaction itself is the caller's choice). A
    transaction read without its events (``keep_events=False``) that changed something is refused:
    its changes are in the events it did not keep."""
    if not isinstance(t, Transaction):
        raise TypeError(
            f"row_changes takes a Transaction (binlake.transactions gives them), not {type(t).__name__}"
        )
    if not t.events and (t.rows or t.kind == DDL):
        raise ValueError(
            f"transaction {t.gtid or t.start} was read with keep_events=False: its changes are in the "
            "events it did not keep (read it with keep_events=True)"
        )
    origin = Origin(
        source,
        file_number(t.source),
        t.start,
        t.gtid,
        t.last_committed,
        t.sequence_number,
        t.commit_time_us or None,
    )
    keep: Keep | None = None
    keep_table: KeepTable | None = None
    if selection is not None:
        keep, keep_table = (lambda ev: selection.keeps_event(t, ev)), selection.keeps_table
    yield from event_changes(
        t.events,
        origin,
        OrderKey(origin.file_number, t.start),
        ddl=t.kind == DDL,
        keep=keep,
        keep_table=keep_table,
    )


def event_changes(
    events: Iterable[Event],
    origin: Origin,
    base: OrderKey,
    *,
    ddl: bool = False,
    keep: Keep | None = None,
    keep_table: KeepTable | None = None,
    file: str | None = None,
) -> Iterator[RowChange]:
    """The changes of a transaction's events (``base``: its order key; ``ddl``: it is a DDL
    statement, whose renames and drops become name changes). ``keep``: events kept; ``keep_table``:
    a rename is kept when either name is; ``file``: the file name every change reports (else each
    event's own)."""
    for ei, ev in enumerate(events):
        b = ev.body
        if ddl and isinstance(b, Query):
            # a statement that took part of its effect (the binlog does not say which) renames or
            # drops nothing here; the schema history reports it (``SchemaTracker``)
            if (keep is None or keep(ev)) and took_whole_effect(b.error_code):
                where = (file or _file_name(ev.source), ev.offset, ev.header.server_id)
                yield from _name_changes(b, origin, base, ei, where, keep_table, ev.header.timestamp)
            continue
        if not isinstance(b, Rows) or b.table is None or (keep is not None and not keep(ev)):
            continue
        b = _applied(ev).body
        if b.undecoded_reason:
            continue
        tm = b.table
        layout = _layouts(tm)
        op = _OPS[b.operation]
        pk = _column_order(tm.primary_key)
        fname = file or _file_name(ev.source)
        for ri, (before, after) in enumerate(b.rows):
            bt = tuple(before) if before is not None else None
            at = tuple(after) if after is not None else None
            kb = _key(pk, bt)
            # a minimal after image leaves out a key that did not change: the before image has it
            ka = _key(pk, at) or kb
            yield RowChange(
                op, tm.database, tm.table, bt, at, ka, kb if op is Op.UPDATE else None, layout, origin,
                fname, ev.offset, ev.header.server_id, base.at(ei, ri),
            )  # fmt: skip


def settled_rows(b: Rows) -> Rows:
    """A PARTIAL_UPDATE_ROWS event's decoded rows with every JSON column its after image gives as
    edits given its value where the binlog holds it. MySQL (binlog_row_value_options=PARTIAL_JSON)
    logs a JSON column the update left as it was — not in its SET, or assigned the value it held —
    as no edits: its value after is its value before, which a FULL or NOBLOB before image holds;
    where the before image leaves the column out (MINIMAL), so does the after image, as MINIMAL does
    for a column an update does not set. Edits over a before image holding the document are applied
    as a replica applies them (``values.json_edits``); edits that cannot be (no document before, an
    edit MySQL would reject) stay, and a sink refuses them."""
    rows = b.rows
    for ri, (before, after) in enumerate(rows):
        if after is None or not any(type(v) is PartialJson for v in after):
            continue
        settled = [_settled_value(before, i, v) if type(v) is PartialJson else v for i, v in enumerate(after)]
        if any(new is not old for new, old in zip(settled, after, strict=True)):
            if rows is b.rows:
                rows = list(rows)
            rows[ri] = (before, settled)
    return b if rows is b.rows else dataclasses.replace(b, rows=rows)


def _settled_value(before: Sequence[Any] | None, i: int, edits: PartialJson) -> Any:
    """Column ``i``'s value after ``edits`` of its before image's value: that value when there are
    none (ABSENT where the before image leaves it out too); the edited document where the before
    image holds one and every edit applies; else the edits."""
    was = ABSENT if before is None else before[i]
    if not edits.diffs:
        return was
    if type(was) is not Json:
        return edits
    done = apply_edits(was, ((d.operation, d.path, d.value) for d in edits.diffs))
    return edits if done is None else done


_PARTIAL_KIND = int(EventType.PARTIAL_UPDATE_ROWS)


def settle_partial_json(t: Transaction) -> Transaction:
    """``t`` with its PARTIAL_UPDATE_ROWS events decoded and ``settled_rows`` (damage raises the error
    reading them with decoding on raises): what a change-log builder reading rows from their bytes
    takes as decoded rows, so both ways give the same changes."""
    for e in t.events:  # (on the change log's hot path: one int compare per event)
        if e.kind == _PARTIAL_KIND:  # a rows body is partial exactly when its kind is (``decode_rows``)
            t.events = [_settled(e) for e in t.events]
            break
    return t


def _settled(e: Event) -> Event:
    return _applied(e) if type(e.body) is Rows and e.body.partial else e


def _applied(ev: Event) -> Event:
    """Rows event ``ev`` as a sink applies it: decoded where it was read with row decoding off
    (damage raises), its partial JSON columns settled (``settled_rows``); rows that do not decode
    keep their ``undecoded_reason``."""
    ev = decoded(ev)
    b = ev.body
    if b.undecoded_reason or not b.partial:
        return ev
    settled = settled_rows(b)
    return ev if settled is b else dataclasses.replace(ev, body=settled)


def _column_order(pk: list[int]) -> Sequence[int]:
    """A key's columns in column order, as the layout's ``pk`` flags list them: every consumer pairs
    ``key`` with ``[c for c in layout if c.pk]`` (the table map lists a key as declared:
    PRIMARY KEY (b, a) is [1, 0])."""
    return pk if len(pk) < 2 or pk == sorted(pk) else sorted(pk)


@functools.lru_cache(maxsize=1024)
def _file_name(source: str) -> str:
    return Path(source).name


def _key(pk: Sequence[int], image: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    if not pk or image is None:
        return None
    if len(pk) == 1:  # the common case, without a generator
        v = image[pk[0]]
        return None if v is ABSENT else (v,)
    key = tuple(image[i] for i in pk)
    return None if any(v is ABSENT for v in key) else key


def _name_changes(
    q: Query,
    origin: Origin,
    base: OrderKey,
    ei: int,
    where: tuple[str, int, int],
    keep_table: KeepTable | None,
    when: int,
) -> Iterator[RowChange]:
    """A DDL statement's renames, drops and added columns (``when``: the epoch second it ran), kept
    when either name is selected."""
    for ri, r in enumerate(renames_in(q.query, q.database)):
        before: tuple[str, ...]
        after: tuple[str, ...] | None
        if isinstance(r, ColumnAdd):
            fill = column_fill(r.column, r.default, when)
            if fill is not None and (keep_table is None or keep_table(*r.table)):
                column, value = fill
                known = ABSENT if isinstance(value, UnknownFill) else value
                yield RowChange(
                    Op.ADD_COLUMN, r.table[0], r.table[1], None, (known,), None, None, (column,), origin,
                    *where, base.at(ei, ri),
                )  # fmt: skip
            continue
        if isinstance(r, TableRename):
            names, table, op = [r.old, r.new], r.old, Op.RENAME_TABLE
            before, after = r.old, r.new
        elif isinstance(r, TableDrop):
            names, table, op = [r.table], r.table, Op.DROP_TABLE
            before, after = r.table, None
        else:
            names, table, op = [r.table], r.table, Op.RENAME_COLUMN
            before, after = (r.old,), (r.new,)
        if keep_table is not None and not any(keep_table(*n) for n in names):
            continue
        yield RowChange(
            op, table[0], table[1], tuple(before), after and tuple(after), None, None, None, origin,
            *where, base.at(ei, ri),
        )  # fmt: skip
