"""PostgreSQL: double-quoted identifiers (63 bytes), schema names it reserves."""

from __future__ import annotations

from binlake.targetnames import SYSTEM_PREFIX, escape_reserved, fit, utf8_len

MAX_IDENT = 63  # bytes (NAMEDATALEN - 1): a longer name is cut silently by the server


def quote_ident(name: str) -> str:
    """``"name"``, a double quote doubled."""
    return '"' + name.replace('"', '""') + '"'


def ident(name: str) -> str:
    """``name`` fitted to PostgreSQL's identifier length (shortened with a stable hash), never cut
    by the server."""
    return fit(name, MAX_IDENT, utf8_len)


def schema_name(db: str) -> str:
    """The schema for source database ``db``: ``pg_*`` and ``information_schema`` are the
    server's own, so those (and only those) move under binlake's prefix — still injective, since
    a source name with that prefix has it twice."""
    if db.startswith("pg_") or db == "information_schema":
        return ident(SYSTEM_PREFIX + db)
    return ident(escape_reserved(db))
