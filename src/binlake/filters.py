"""Selections shared by ``dump`` and everything downstream: by time, GTID, schema, table, operation.

Times select by *commit* time (exact where the server wrote it, else the ending event's header time),
so a transaction is kept or dropped whole; schema, table and operation select row changes within it.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from dataclasses import dataclass, field

from binlake.events.base import Event
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.gtid import AnyGtidSet
from binlake.statements import classify
from binlake.txn import DDL, Transaction

OPERATIONS = ("insert", "update", "delete", "ddl")


def statement_databases(q: Query) -> set[str]:
    """The databases a statement works on: its default one, the server's list of updated
    databases (MySQL), and those of the tables and databases it names (``statements.classify``)."""
    dbs = {q.database} if q.database else set()
    dbs |= set(q.status.get("updated_db_names") or [])
    dbs |= set(classify(q.query, q.database).databases)
    return dbs


def parse_datetime(text: str) -> dt.datetime:
    """``YYYY-MM-DD[ HH:MM:SS[.ffffff]]`` or ISO 8601 with an offset; no offset means UTC. A
    ``ValueError`` that names the text (and why: ``day is out of range for month`` …)."""
    try:
        value = dt.datetime.fromisoformat(
            text.strip().replace(" ", "T", 1) if " " in text.strip() else text.strip()
        )
    except ValueError as e:
        raise ValueError(f"{text!r} is not a date/time (YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]): {e}") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _us(value: dt.datetime) -> int:
    return int(value.timestamp() * 1_000_000)


@dataclass
class Selection:
    start_time: dt.datetime | None = None
    stop_time: dt.datetime | None = None
    include_gtids: AnyGtidSet | None = None  # MySQL and/or MariaDB GTIDs
    exclude_gtids: AnyGtidSet | None = None
    databases: list[str] = field(default_factory=list)  # glob patterns
    tables: list[str] = field(default_factory=list)  # "table" or "db.table" glob patterns
    operations: list[str] = field(default_factory=list)

    @classmethod
    def from_options(cls, options: dict[str, str]) -> Selection:
        """From data-source style options (keys lower-cased, lists comma-separated): databases,
        tables, operations, startdatetime, stopdatetime, includegtids, excludegtids."""

        def items(key: str) -> list[str]:
            return [x.strip() for x in options.get(key, "").split(",") if x.strip()]

        def when(key: str) -> dt.datetime | None:
            return parse_datetime(options[key]) if options.get(key) else None

        def gtids(key: str) -> AnyGtidSet | None:
            return AnyGtidSet.parse(options[key]) if options.get(key) else None

        ops = items("operations")
        if unknown := set(ops) - set(OPERATIONS):
            raise ValueError(f"unknown operations {sorted(unknown)}; known: {', '.join(OPERATIONS)}")
        return cls(
            start_time=when("startdatetime"),
            stop_time=when("stopdatetime"),
            include_gtids=gtids("includegtids"),
            exclude_gtids=gtids("excludegtids"),
            databases=items("databases"),
            tables=items("tables"),
            operations=ops,
        )

    @property
    def by_rows(self) -> bool:
        return bool(self.databases or self.tables or self.operations)

    def keeps_transaction(self, t: Transaction) -> bool:
        when = t.commit_time_us
        if self.start_time is not None and when < _us(self.start_time):
            return False
        if self.stop_time is not None and when >= _us(self.stop_time):
            return False
        if self.include_gtids is not None and not self._in(self.include_gtids, t.gtid):
            return False
        if self.exclude_gtids is not None and self._in(self.exclude_gtids, t.gtid):
            return False
        if self.operations and t.kind == DDL and "ddl" not in self.operations:
            return False
        return True

    @staticmethod
    def _in(gtids: AnyGtidSet, gtid: str | None) -> bool:
        """Whether a transaction's GTID is in ``gtids`` (anonymous transactions never are)."""
        return gtid is not None and gtids.contains_gtid(gtid)

    def to_options(self) -> dict[str, str]:
        """The data-source options (see ``from_options``) for this selection, so that ``sync``
        selects what ``dump`` does. Lists are comma-separated there: a pattern with a comma cannot go."""
        for pattern in (*self.databases, *self.tables):
            if "," in pattern:
                raise ValueError(f"{pattern!r}: a pattern for the data source cannot hold a comma")
        out = {
            "databases": ",".join(self.databases),
            "tables": ",".join(self.tables),
            "operations": ",".join(self.operations),
            "startDatetime": self.start_time.isoformat() if self.start_time else "",
            "stopDatetime": self.stop_time.isoformat() if self.stop_time else "",
            "includeGtids": str(self.include_gtids) if self.include_gtids is not None else "",
            "excludeGtids": str(self.exclude_gtids) if self.exclude_gtids is not None else "",
        }
        return {k: v for k, v in out.items() if v}

    def keeps_table(self, database: str, table: str) -> bool:
        if self.databases and not any(fnmatch.fnmatchcase(database, p) for p in self.databases):
            return False
        if self.tables and not any(
            fnmatch.fnmatchcase(f"{database}.{table}" if "." in p else table, p) for p in self.tables
        ):
            return False
        return True

    def keeps_event(self, t: Transaction, ev: Event) -> bool:
        """Within a kept transaction: row changes (and their table maps) of the selected tables and
        operations; DDL by its database; everything else."""
        b = ev.body
        if isinstance(b, Rows):
            if b.table is None:
                return not self.by_rows
            return self.keeps_table(b.table.database, b.table.table) and (
                not self.operations or b.operation in self.operations
            )
        if isinstance(b, TableMap):
            return self.keeps_table(b.database, b.table)
        if isinstance(b, Query) and t.kind == DDL:
            if self.operations and "ddl" not in self.operations:
                return False
            dbs = statement_databases(b)
            return not self.databases or any(fnmatch.fnmatchcase(d, p) for d in dbs for p in self.databases)
        return True

    def keeps(self, t: Transaction) -> bool:
        """Whether anything of this transaction survives the selection."""
        if not self.keeps_transaction(t):
            return False
        if not self.by_rows:
            return True
        return any(
            isinstance(e.body, (Rows, Query))
            and self.keeps_event(t, e)
            and not (isinstance(e.body, Query) and t.kind != DDL)
            for e in t.events
        )
