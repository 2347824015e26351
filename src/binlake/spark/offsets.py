"""The positions a sync target records (``binlake offsets show|reset``).

Delta (and Parquet's Delta state): per table, the app-transaction version of ``binlake-sync`` and
the ``binlake.position`` / ``binlake.source`` of its last sync commit. JDBC: one row per source in
``_binlake_positions``.

A reset forgets them, so the next sync applies its whole input again. Keyed tables take that
safely: the order-key guard keeps every row that is as new already. Change tables (tables without
a key, append-only) guard by order key too — Delta by the ``binlake.order_key`` of their last
append (``appended_upto``), JDBC by the greatest order key they hold — so a re-apply would append
nothing to them, and forgetting that guard while they keep their rows would append every change a
second time. A reset therefore refuses while change tables hold rows, unless told to empty them
(``empty_change_tables``): then they are emptied with the position forgotten, and the next sync
refills them exactly. (Delta keeps the emptied rows in the table's history: time travel reads them.)
The rename journal is kept: tables stay where upstream renames put them. A batch sync's records
of where it ended (``binlake.spark.resume``) are forgotten with the positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from binlake.spark import resume
from binlake.spark.sinks.delta import APP_ID, commit_empty, delta_tables
from binlake.spark.sinks.jdbc_connection import tables_with
from binlake.spark.sinks.jdbc_records import JdbcRecords
from binlake.targetnames import inside

CHANGE_OP = "_binlake_op"  # the column only change tables have
RESET_VERSION = 0  # below every batch version: "nothing applied"


class OffsetsError(ValueError):
    """A reset that would lose or double data, or a target that is not a sync target."""


@dataclass
class Offset:
    """One recorded position: of a Delta table, or of a JDBC target's source (``table`` None)."""

    source: str
    table: str | None
    version: int | None  # None or RESET_VERSION: nothing applied (never synced, or reset)
    position: str
    change_table: bool = False
    rows: int = 0

    @property
    def shown(self) -> str:
        """The position as ``offsets show`` prints it."""
        return self.position if self.version else "(none: the next sync applies everything)"


def delta_offsets(target: str | Path) -> list[Offset]:
    """Per Delta table under ``target``: the version and position of its last sync commit."""
    from deltalake import DeltaTable

    out = []
    for name in delta_tables(target):
        table = DeltaTable(str(inside(Path(target), name)))
        last = next((c for c in table.history() if "binlake.position" in c), {})
        out.append(
            Offset(
                source=str(last.get("binlake.source", "")),
                table=name,
                version=table.transaction_version(APP_ID),
                position=str(last.get("binlake.position", "")),
                change_table=CHANGE_OP in pa.schema(table.schema().to_arrow()).names,
                rows=table.to_pyarrow_dataset().count_rows(),
            )
        )
    return out


def _refuse_full_change_tables(full: list[str], empty: bool) -> None:
    """Refuse to forget the guard of change tables that hold rows, unless they are emptied."""
    if full and not empty:
        raise OffsetsError(
            f"change tables (no primary key) hold rows: {', '.join(full)}; a re-apply "
            "would append nothing to them (they guard by order key) or, without the guard, append "
            "every change twice: pass --empty-change-tables to empty them so the next sync refills them"
        )


def reset_delta(
    target: str | Path, source: str | None = None, *, empty_change_tables: bool = False
) -> list[Offset]:
    """Forget the positions of the Delta tables under ``target`` (of ``source`` only, if given): one
    commit per table records version 0 and no order key, data untouched except change tables, which
    are emptied in that same commit (see the module docstring). Returns the offsets reset."""
    from deltalake import CommitProperties, Transaction

    chosen = [o for o in delta_offsets(target) if o.version and (source is None or o.source == source)]
    _refuse_full_change_tables(
        [str(o.table) for o in chosen if o.change_table and o.rows], empty_change_tables
    )
    for o in chosen:
        path = inside(Path(target), str(o.table))
        metadata = {"binlake.position": "", "binlake.order_key": "", "binlake.source": o.source}
        props = CommitProperties(
            custom_metadata={**metadata, "binlake.reset": f"was {o.position}"},
            app_transactions=[Transaction(APP_ID, RESET_VERSION)],
        )
        commit_empty(path, props, overwrite=o.change_table)
    resume.FileRecords(Path(target)).forget(source)  # the next batch sync reads all, not from a record
    return chosen


def jdbc_offsets(db: Any) -> list[Offset]:
    """The rows of a JDBC target's ``_binlake_positions`` (``db``: a ``binlake.spark.sinks.jdbc_connection.Jdbc``)."""
    from binlake.spark.sinks.jdbc_dialects import POSITIONS

    db.execute(db.dialect.positions_ddl())
    rows = db.rows(f"SELECT source, version, position FROM {POSITIONS} ORDER BY source")
    return [Offset(source=s, table=None, version=int(v), position=p) for s, v, p in rows]


def jdbc_change_tables(db: Any) -> list[tuple[str, str, int]]:
    """The change tables of a JDBC target (those with ``_binlake_op``): schema, table, rows."""
    d = db.dialect
    out = []
    for s, t in tables_with(db, CHANGE_OP):
        (n,) = db.rows(f"SELECT COUNT(*) FROM {d.q(s)}.{d.q(t)}")[0]
        out.append((s, t, int(n)))
    return out


def reset_jdbc(db: Any, source: str | None = None, *, empty_change_tables: bool = False) -> list[Offset]:
    """Forget the positions of a JDBC target (of ``source`` only, if given), and with
    ``empty_change_tables`` empty its change tables, in one transaction. Change tables do not say
    which source their rows came from: emptying them for one source of several is refused."""
    from binlake.spark.sinks.jdbc_dialects import POSITIONS

    recorded = jdbc_offsets(db)
    from binlake.spark.sinks.jdbc_connection import source_key

    chosen = [o for o in recorded if source is None or o.source in (source, source_key(source))]
    changes = [(s, t) for s, t, n in jdbc_change_tables(db) if n]
    if chosen:
        _refuse_full_change_tables([f"{s}.{t}" for s, t in changes], empty_change_tables)
    if chosen and changes and len(chosen) < len(recorded):
        raise OffsetsError(
            "the change tables hold rows of several sources and cannot be emptied for one: "
            "reset every source (no --source)"
        )
    records = JdbcRecords(db)
    with db.transaction():
        for o in chosen:
            db.execute(f"DELETE FROM {POSITIONS} WHERE source = ?", [o.source])
        for s, t in changes if chosen else []:
            db.execute(f"DELETE FROM {db.dialect.q(s)}.{db.dialect.q(t)}")
        records.forget(source)  # the next batch sync reads all, not from a record
    return chosen
