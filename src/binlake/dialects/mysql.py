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


# control characters as ``\xNN`` (how dump text writes them in values too)
_CONTROLS = {c: f"\\x{c:02x}" for c in range(0x20)}


def comment_text(text: str) -> str:
    """``text`` (a name) for a ``#`` or ``###`` comment line of dump text: control characters
    escaped, so a name from the binlog never ends the comment and starts a line a SQL client fed
    the dump would run (MySQL allows a newline in a column name)."""
    return text.translate(_CONTROLS)


def quote_str(text: str) -> str:
    """A string literal that reads back as ``text`` whatever ``sql_mode`` (backslashes escaped)."""
    return "'" + text.translate(_ESCAPE_TABLE) + "'"


def ident(name: str) -> str:
    """``name`` fitted to MySQL's identifier length (shortened with a stable hash)."""
    return fit(name, MAX_IDENT)
