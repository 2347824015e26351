"""Delta Lake predicates and update expressions (delta-rs / DataFusion SQL): backquoted
identifiers, a backquote doubled; no length limit on column names."""

from __future__ import annotations


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def column(alias: str, name: str) -> str:
    """``alias.`name``` for a predicate."""
    return f"{alias}.{quote_ident(name)}"


def keys_equal(keys: list[str], left: str = "t", right: str = "s") -> str:
    """Rows ``left`` and ``right`` have the same key."""
    return " AND ".join(f"{column(left, k)} = {column(right, k)}" for k in keys)
