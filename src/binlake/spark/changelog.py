"""The change log of a binlog file (``binlake.arrowlog.changelog`` holds its schema and batches).

``op`` is insert / update / delete for row changes, and ``rename_table`` / ``rename_column`` for the
renames DDL makes (before/after hold the old and new name; no images, key or columns) and
``drop_table`` (before: the name it frees), which sinks follow so a renamed table or column keeps its
rows; ``add_column`` (columns: the new column; after: the value every row the table held gets, no
field where only the server knew it), which sinks give the rows they hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from binlake.arrowlog.changelog import (
    CHANGELOG_SCHEMA,
    SPARK_DDL,
    ColumnsOnce,
    Trim,
    changelog_batches,
    fed,
    rows_of,
    transaction_batches,
)
from binlake.arrowlog.images import PARTIAL_JSON_KEY, use_compiled_images
from binlake.changes import NAME_OPS as _NAME_OPS
from binlake.changes import ROW_OPS as _ROW_OPS
from binlake.changes import RowChange, file_number, row_changes
from binlake.errors import UnappliableChangeError
from binlake.events.base import Event
from binlake.events.types import EventType
from binlake.filters import Selection
from binlake.gcpace import paced
from binlake.reader import BinlogReader
from binlake.txn import UNFINISHED, Transaction, TransactionGrouper

ROW_OPS = tuple(o.value for o in _ROW_OPS)
NAME_OPS = tuple(o.value for o in _NAME_OPS)
RENAME_TABLE, RENAME_COLUMN, DROP_TABLE = NAME_OPS  # for the sinks
ADD_COLUMN = "add_column"
SCHEMA_OPS = (*NAME_OPS, ADD_COLUMN)  # the changes a DDL statement makes

# How a partial JSON update shows in ``to_json(after)``: a JSON column otherwise holds a string, so
# an object there, a column's value (after a ``:``) whose key is ``json_diff`` (unescaped), is one —
# an empty edit list too (``{"json_diff":[]}``: MySQL's no-op assignment). A column named json_diff
# starts a field (after ``{`` or ``,``), never a value.
PARTIAL_JSON_MARK = ':{"' + PARTIAL_JSON_KEY + '":['


def partial_json_error(row: Any) -> UnappliableChangeError:
    """The error for an update whose ``after`` holds a partial JSON update (``row``: db, table,
    file, position and ``after`` as JSON text): one line naming the table, column and position."""
    image = json.loads(row["after"])
    column = next(c for c, v in image.items() if isinstance(v, dict) and PARTIAL_JSON_KEY in v)
    return UnappliableChangeError(
        f"table {row['db']}.{row['table']}, column {column}: a partial JSON update "
        "(binlog_row_value_options=PARTIAL_JSON) carries only edits of a document the binlog does not "
        "hold; nothing was written. Have the source log whole documents (binlog_row_value_options='') "
        "and sync from a copy taken after that",
        table=f"{row['db']}.{row['table']}",
        column=column,
        source=row["file"],
        offset=row["position"],
    )


def file_changes(
    path: str | Path,
    source: str = "",
    observers: list[Any] | None = None,
    start: int | None = None,
    stop: int | None = None,
    selection: Selection | Any | None = None,
) -> Iterator[RowChange]:
    """The changes of the complete transactions of one binlog file (an unfinished tail is not
    emitted: it is re-read once the server has finished it)."""
    for t in file_transactions(path, observers, start, stop, selection):
        yield from row_changes(t, selection, source)


def file_transactions(
    path: str | Path,
    observers: list[Any] | None = None,
    start: int | None = None,
    stop: int | None = None,
    selection: Selection | Any | None = None,
    raw_rows: bool = False,
) -> Iterator[Transaction]:
    """The complete transactions of one binlog file that ``selection`` keeps, events kept.
    ``raw_rows``: rows events keep their bytes (read with ``decode_rows`` off, their ``rows`` and
    the transaction's ``rows`` count empty) for ``transaction_batches``, which writes them
    from the bytes or decodes them."""
    g = TransactionGrouper(keep_events=True)
    reader = BinlogReader(
        path, observers=observers, start_position=start, stop_position=stop, decode_rows=not raw_rows
    )
    fno = file_number(str(path))
    for t in fed(reader, fno, g):
        if t.kind != UNFINISHED and (selection is None or selection.keeps_transaction(t)):
            yield t


def file_batches(
    path: str | Path,
    source: str = "",
    observers: list[Any] | None = None,
    start: int | None = None,
    stop: int | None = None,
    selection: Selection | Any | None = None,
    trim: Trim | None = None,
) -> Iterator[pa.RecordBatch]:
    """``to_batches(file_changes(...))``: the change log of one binlog file as record batches,
    without a ``RowChange`` per row where the compiled builder is chosen and nothing is selected
    (``arrowlog.changelog.transaction_batches``). ``trim``: what the batches leave out (``Trim``).
    Built with the cycle collector paced (``gcpace``): the pass's objects die young. A read of the
    last changes per key is told where PARTIAL_UPDATE_ROWS events are (``PartialUpdates``): only
    their rows can hold a partial JSON update."""
    trim = trim or Trim()
    suspects: set[int] | None = set() if trim.last else None
    if suspects is not None:
        observers = [*(observers or []), PartialUpdates(suspects)]
    if selection is not None:
        built = to_batches(file_changes(path, source, observers, start, stop, selection), trim=trim)
    else:
        raw = use_compiled_images()  # the compiled builder writes images from the rows' bytes
        built = transaction_batches(
            file_transactions(path, observers, start, stop, raw_rows=raw), source, trim=trim
        )
    return paced(iter(trim.batches(built, suspects)))


class PartialUpdates:
    """A reader's observer adding to ``offsets`` the position of each PARTIAL_UPDATE_ROWS event it
    reads (a compressed transaction's inner events: the payload's, as their rows' ``position`` is).
    A decoder gives it those events alone (``event_kinds``)."""

    event_kinds = frozenset({int(EventType.PARTIAL_UPDATE_ROWS)})

    def __init__(self, offsets: set[int]) -> None:
        self.offsets = offsets

    def __call__(self, event: Event) -> None:
        self.offsets.add(event.offset)


# the options that trim a read (``arrowlog.changelog.Trim``): their values, the default first
TRIM_OPTIONS = {"columns": ("every", "first"), "before": ("every", "keyless"), "changes": ("every", "last")}


def read_trim(options: dict[str, str]) -> Trim:
    """What a read with ``options`` leaves out: ``columns`` ``first`` (each layout's columns once per
    range, a ``layout`` number on every row), ``before`` ``keyless`` (a keyed change's ``before``
    image NULL), ``changes`` ``last`` (only the last change per key of each stretch of a range, and
    how many changes each row stands for: ``binlake.arrowlog.compact``); every option at its
    default: nothing."""
    chosen = {}
    for name, values in TRIM_OPTIONS.items():
        chosen[name] = options.get(name, values[0]).lower()
        if chosen[name] not in values:
            raise ValueError(f"option {name}: {' or '.join(values)}, not {chosen[name]!r}")
    once = ColumnsOnce() if chosen["columns"] == "first" else None
    return Trim(once, keyed_before=chosen["before"] == "every", last=chosen["changes"] == "last")


def spark_ddl(options: dict[str, str]) -> str:
    """The change log's schema as a read with ``options`` gives it."""
    return read_trim(options).spark_ddl


to_batches = changelog_batches

__all__ = [
    "CHANGELOG_SCHEMA", "SPARK_DDL", "changelog_batches", "file_batches", "file_number", "rows_of", "to_batches",
]  # fmt: skip
