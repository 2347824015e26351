"""The schema history's seed from a live server: its tables' definitions (SHOW CREATE TABLE) as of
a binlog position, so a binlog without column metadata (``binlog_row_metadata=MINIMAL``, MySQL
before 8.0) is read with the right names, types and keys from the snapshot on, and the DDL after
that position keeps the history in step."""

from __future__ import annotations

import copy
from typing import Any

from binlake.dialects.mysql import quote_ident
from binlake.replication.client import current_position
from binlake.schema.ddl import DdlNotUnderstood, apply_ddl
from binlake.schema.history import NotUnderstood, SchemaHistory
from binlake.snapshot.chunks import SnapshotError

ATTEMPTS = 10


def server_catalog(conn: Any, tables: list[tuple[str, str]]) -> SchemaHistory:
    """A history whose seed is ``tables`` as the server defines them now (names quoted: any name)."""
    h = SchemaHistory()
    with conn.cursor() as cur:
        for db, name in tables:
            cur.execute(f"SHOW CREATE TABLE {quote_ident(db)}.{quote_ident(name)}")
            sql = cur.fetchone()[1]
            try:  # SHOW CREATE TABLE names the table alone: its database is the default one
                apply_ddl(h.catalog, sql, db, h.database_charsets, h.server_charset)
            except DdlNotUnderstood as e:
                h.not_understood.append(NotUnderstood(("<server>", 0), sql, str(e)))
    h.seed = copy.deepcopy(h.catalog)
    return h


def seed_at_position(conn: Any, tables: list[tuple[str, str]]) -> SchemaHistory:
    """``tables`` as of the server's binlog end, read without a lock: the catalog, the position,
    the catalog again, until both reads agree (a DDL between them would put the seed on the wrong
    side of its own binlog event). DDL before that position is in the seed: the history skips it
    (``seeded_at``)."""
    for _ in range(ATTEMPTS):
        before = server_catalog(conn, tables)
        at = current_position(conn)
        after = server_catalog(conn, tables)
        if before.catalog == after.catalog:
            before.seeded_at = before.position = (at.file, at.position)
            return before
    raise SnapshotError(f"the tables' definitions changed during each of {ATTEMPTS} reads of them")
