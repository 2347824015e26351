"""MySQL / MariaDB: backquoted identifiers (64 characters), string literals for scripts."""

from __future__ import annotations

from binlake.targetnames import fit

MAX_IDENT = 64  # characters, for databases, tables and columns alike
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\0": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z"}
_ESCAPE_TABLE = str.maketrans(_ESCAPES)  # ``str.translate``: every other character as it is


def quote_ident(name: str) -> str:
    """```name```, a backquote doubled: any text is one identifier (NUL aside, which MySQL names
    cannot hold)."""
    return "`" + name.replace("`", "``") + "`"


def quote_str(text: str) -> str:
    """A string literal that reads back as ``text`` whatever ``sql_mode`` (backslashes escaped)."""
    return "'" + text.translate(_ESCAPE_TABLE) + "'"


def ident(name: str) -> str:
    """``name`` fitted to MySQL's identifier length (shortened with a stable hash)."""
    return fit(name, MAX_IDENT)
