"""A JDBC target's records of where its batch syncs ended (``binlake.spark.resume``): table
``_binlake_resume`` beside ``_binlake_positions``, one row per record, checked by the source's
batch position (which commits with the data: a reset deletes it, and the records go with it) and
the synced tables there."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from binlake.spark.sinks.jdbc_connection import (
    SOURCE_WIDTH,
    Jdbc,
    committed_position,
    source_key,
    tables_with,
)
from binlake.spark.typedrows import ORDER

RECORDS = "_binlake_resume"
POSITION = "the position of this source (_binlake_positions)"  # the one part a record checks


class JdbcRecords:
    """``resume.Records`` in table ``RECORDS`` of the connection ``db``."""

    def __init__(self, db: Jdbc) -> None:
        self.db = db

    def _there(self) -> bool:
        """Whether the table exists (reading writes nothing: a sync refused before it writes, e.g.
        into the server it reads, leaves the target as it was)."""
        schema = self.db.dialect.system_schema()
        return bool(
            self.db.rows(
                "SELECT 1 FROM information_schema.tables WHERE table_name = ?"
                + (" AND table_schema = ?" if schema else " AND table_catalog = current_database()"),
                [RECORDS, *([schema] if schema else [])],
            )
        )

    def read(self, name: str) -> str | None:
        if not self._there():
            return None
        found = self.db.rows(f"SELECT record FROM {RECORDS} WHERE record_key = ?", [name])
        return str(found[0][0]) if found else None

    def write(self, name: str, source: str, text: str) -> None:
        self.db.execute(
            f"CREATE TABLE IF NOT EXISTS {RECORDS} (record_key VARCHAR(64) PRIMARY KEY, "
            f"source VARCHAR({SOURCE_WIDTH}) NOT NULL, record TEXT NOT NULL)"
        )
        with self.db.transaction():
            self.db.execute(f"DELETE FROM {RECORDS} WHERE record_key = ?", [name])
            self.db.execute(
                f"INSERT INTO {RECORDS} (record_key, source, record) VALUES (?, ?, ?)",
                [name, source_key(source), text],
            )

    def forget(self, source: str | None) -> int:
        if not self._there():
            return 0
        where, params = ("", []) if source is None else (" WHERE source = ?", [source_key(source)])
        (n,) = self.db.rows(f"SELECT COUNT(*) FROM {RECORDS}{where}", params)[0]
        self.db.execute(f"DELETE FROM {RECORDS}{where}", params)
        return int(n)

    def every(self) -> list[str]:
        if not self._there():
            return []
        return [str(r[0]) for r in self.db.rows(f"SELECT record FROM {RECORDS} ORDER BY record_key")]

    def holds(self, source: str) -> dict[str, Any]:
        """The source's batch position, and the synced tables there."""
        return {
            "position": committed_position(self.db, source_key(source)),
            "tables": sorted(f"{s}.{t}" for s, t in tables_with(self.db, ORDER)),
        }

    def changed(self, source: str, held: dict[str, Any]) -> str:
        """The source's position gone (a reset) or back, or a synced table gone: a table dropped in
        the target is brought back by a read of the whole series."""
        now = self.holds(source)
        if held.get("position") is not None and (
            now["position"] is None or now["position"] < held["position"]
        ):
            return f"{POSITION} is not at the last sync's any more (reset?)"
        gone = sorted(set(held.get("tables") or []) - set(now["tables"]))
        if gone:
            return f"table {gone[0]} is not in the target any more"
        return ""


@contextmanager
def jdbc_records(spark: Any, url: str, password: str | None) -> Iterator[JdbcRecords]:
    """The records of the target at ``url``, on a connection of their own."""
    db = Jdbc(spark, url, password)
    try:
        yield JdbcRecords(db)
    finally:
        db.close()
