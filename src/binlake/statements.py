"""One classification of a Query event's statement, shared by every consumer: where a transaction
begins and ends (txn), which DDL can change a table layout (schema), the renames and drops a change
log follows (schema.renames), the databases a statement touches (filters), SQL output (render.sql)
and XA ids as typed values (globalbinlog).

It reads only what it needs, with a small tokenizer over the statement's head: comments are
skipped (a versioned ``/*!NNNNN … */`` comment's body counts, as the server ran it), identifiers
may be backquoted (doubled backquotes inside) or ANSI double-quoted. No sqlglot: this runs on every
Query event, and most are ``BEGIN``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

TableName = tuple[str, str]  # (database, table)


class Kind(Enum):
    """What a statement does to the transaction around it, or to the schema."""

    BEGIN = "begin"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    RELEASE_SAVEPOINT = "release_savepoint"
    ROLLBACK_TO_SAVEPOINT = "rollback_to_savepoint"
    XA_START = "xa_start"
    XA_END = "xa_end"
    XA_PREPARE = "xa_prepare"
    XA_COMMIT = "xa_commit"
    XA_ROLLBACK = "xa_rollback"
    DDL = "ddl"  # schema objects, accounts, maintenance, administration: implicit commits
    DML = "dml"  # statement-format data changes (INSERT, UPDATE, DELETE, LOAD DATA, CALL …)
    SET = "set"  # session variables
    UNKNOWN = "unknown"


class Ddl(Enum):
    """The sub-kind of a DDL statement."""

    CREATE_TABLE = "create_table"
    ALTER_TABLE = "alter_table"
    DROP_TABLE = "drop_table"
    RENAME_TABLE = "rename_table"
    TRUNCATE_TABLE = "truncate_table"
    CREATE_DATABASE = "create_database"
    ALTER_DATABASE = "alter_database"
    DROP_DATABASE = "drop_database"
    CREATE_INDEX = "create_index"
    DROP_INDEX = "drop_index"
    VIEW = "view"
    TRIGGER = "trigger"
    ROUTINE = "routine"  # procedures, functions, packages
    EVENT = "event"
    SEQUENCE = "sequence"
    ACCOUNT = "account"  # users, roles, grants, passwords
    MAINTENANCE = "maintenance"  # ANALYZE / OPTIMIZE / REPAIR / CHECK TABLE
    OTHER = "other"  # tablespaces, servers, plugins, FLUSH …


DATABASE_DDL = frozenset({Ddl.CREATE_DATABASE, Ddl.ALTER_DATABASE, Ddl.DROP_DATABASE})

# Error codes a DDL statement is logged with whose effect is nonetheless the whole statement's:
# 1051 (ER_BAD_TABLE_ERROR) is MySQL 5.7's ``DROP TABLE t1, missing``: t1 was dropped, and what is
# missing does not exist to drop. Any other code (a foreign key refusing one of the tables: 1451)
# means a part took effect and the binlog does not say which.
WHOLE_EFFECT_ERRORS = frozenset({0, 1051})


def took_whole_effect(error_code: int) -> bool:
    """Whether a statement logged with ``error_code`` did all it says (a replica repeating it does)."""
    return error_code in WHOLE_EFFECT_ERRORS


@dataclass(frozen=True, slots=True)
class XaId:
    """An XA transaction id as the server keeps it: formatID, gtrid and bqual bytes."""

    format_id: int
    gtrid: bytes
    bqual: bytes

    def __str__(self) -> str:
        """As XA statements in a binlog print it: ``X'..',X'..',formatID``."""
        return f"X'{self.gtrid.hex()}',X'{self.bqual.hex()}',{self.format_id}"


@dataclass(frozen=True, slots=True)
class Statement:
    kind: Kind
    ddl: Ddl | None = None
    tables: tuple[TableName, ...] = ()  # tables (and views, sequences) it names, qualified
    databases: tuple[str, ...] = ()  # of those tables, and the databases/routines it names
    renames: tuple[tuple[TableName, TableName], ...] = ()  # RENAME TABLE, ALTER TABLE … RENAME
    xid: XaId | None = None
    temporary: bool = False
    one_phase: bool = False  # XA COMMIT … ONE PHASE
    layout_neutral: bool = False  # an ALTER TABLE whose every action keeps the row layout
    renames_columns: bool = False  # an ALTER TABLE with CHANGE or RENAME COLUMN
    actions: tuple[str, ...] = ()  # ALTER TABLE: the first one or two words of each action, upper-cased


# --- tokens ---------------------------------------------------------------------------------------

# blanks and comments before a token; a versioned comment's opening and closing marks are blanks
# too, so its body is read as statement text
_TOKEN = re.compile(
    r"""(?:\s|/\*M?!\d*|\*/|/\*.*?\*/|--(?=\s|$)[^\n]*|\#[^\n]*)*
    (?:`(?P<q>(?:[^`]|``)*)`
     |(?P<w>[\w$]+)
     |(?P<s>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
     |(?P<p>.))""",
    re.S | re.X,
)
_ESCAPE = re.compile(r"\\(.)|''|\"\"", re.S)
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}


def _unquote(literal: str) -> str:
    """The text of a quoted string literal (backslash escapes, doubled quotes)."""
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m[1], m[1]) if m[1] else m[0][0], literal[1:-1])


class _Tok(NamedTuple):
    kind: str  # q: backquoted identifier, w: word, s: string literal, p: punctuation
    text: str
    start: int
    end: int
    key: str | None  # a word upper-cased, a punctuation mark, else None (what ``accept`` compares)

    @property
    def word(self) -> str | None:
        return self.key if self.kind == "w" else None


def _tok(m: re.Match[str]) -> _Tok:
    kind = m.lastgroup or "p"
    text = m[kind]
    key = text.upper() if kind == "w" else text if kind == "p" else None
    return _Tok(kind, text, m.start(kind), m.end(), key)


class _Tokens:
    """Tokens read lazily (most statements are decided by their first two words)."""

    __slots__ = ("text", "pos", "toks", "i", "done")

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.i, self.done = text, 0, 0, False
        self.toks: list[_Tok] = []

    def peek(self, k: int = 0) -> _Tok | None:
        while len(self.toks) <= self.i + k and not self.done:
            m = _TOKEN.match(self.text, self.pos)
            if m is None:
                self.done = True
                break
            self.toks.append(_tok(m))
            self.pos = m.end()
        return self.toks[self.i + k] if self.i + k < len(self.toks) else None

    def rest(self) -> list[_Tok]:
        """Every token (read at once: for statements whose whole text matters)."""
        if not self.done:
            self.toks += map(_tok, _TOKEN.finditer(self.text, self.pos))
            self.done = True
        return self.toks

    def word(self, k: int = 0) -> str | None:
        t = self.peek(k)
        return t.word if t is not None else None

    def take(self) -> _Tok | None:
        t = self.peek()
        if t is not None:
            self.i += 1
        return t

    def accept(self, *words: str) -> bool:
        """Consume ``words`` (upper-case words or punctuation marks) if they come next."""
        if all((t := self.peek(k)) is not None and t.key == w for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def punct(self, ch: str) -> bool:
        t = self.peek()
        if t is not None and t.kind == "p" and t.text == ch:
            self.i += 1
            return True
        return False


def _name(tk: _Tokens) -> str | None:
    """An identifier: bare, backquoted, or double-quoted (ANSI_QUOTES)."""
    t = tk.peek()
    if t is None:
        return None
    if t.kind == "q":
        name = t.text.replace("``", "`")
    elif t.kind == "w":
        name = t.text
    elif t.kind == "s" and t.text.startswith('"'):
        name = t.text[1:-1].replace('""', '"')  # identifiers know no backslash escapes
    else:
        return None
    tk.i += 1
    return name


def _qualified(tk: _Tokens, default_db: str) -> TableName | None:
    """``name`` or ``db.name``, qualified with ``default_db``."""
    first = _name(tk)
    if first is None:
        return None
    if tk.punct("."):
        second = _name(tk)
        return (first, second) if second is not None else None
    return (default_db, first)


def _if_exists(tk: _Tokens) -> None:
    tk.accept("IF", "NOT", "EXISTS") or tk.accept("IF", "EXISTS")


# --- what follows the leading keywords ----------------------------------------------------------


@dataclass(slots=True)
class _Found:
    tables: list[TableName]
    databases: list[str]
    renames: list[tuple[TableName, TableName]]
    xid: XaId | None = None
    one_phase: bool = False
    layout_neutral: bool = False
    renames_columns: bool = False
    actions: list[str] = field(default_factory=list)


def _nothing(tk: _Tokens, db: str, f: _Found) -> None:
    return None


def _one_table(tk: _Tokens, db: str, f: _Found) -> None:
    _if_exists(tk)
    t = _qualified(tk, db)
    if t is not None:
        f.tables.append(t)


def _table_list(tk: _Tokens, db: str, f: _Found) -> None:
    _if_exists(tk)
    while (t := _qualified(tk, db)) is not None:
        f.tables.append(t)
        if not tk.punct(","):
            break


def _rename_pairs(tk: _Tokens, db: str, f: _Found) -> None:
    _if_exists(tk)
    while (old := _qualified(tk, db)) is not None:
        if not tk.accept("TO") or (new := _qualified(tk, db)) is None:
            break
        f.renames.append((old, new))
        f.tables += [old, new]
        if not tk.punct(","):
            break


_DATABASE_OPTIONS = frozenset({"DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT", "ENCRYPTION", "READ"})


def _database(tk: _Tokens, db: str, f: _Found) -> None:
    _if_exists(tk)
    t = tk.peek()
    if t is None or t.word in _DATABASE_OPTIONS:  # ALTER DATABASE without a name: the default one
        f.databases.append(db)
    elif (name := _name(tk)) is not None:
        f.databases.append(name)


def _routine(tk: _Tokens, db: str, f: _Found) -> None:
    """Procedures, functions, events, triggers by name: their database."""
    _if_exists(tk)
    t = _qualified(tk, db)
    if t is not None:
        f.databases.append(t[0])


def _skip_to(tk: _Tokens, *words: str) -> bool:
    """Consume tokens up to and including ``words`` at parenthesis depth 0; False at the end."""
    toks, depth, n, i = tk.rest(), 0, len(words), tk.i
    while i < len(toks):
        key = toks[i].key
        if key == "(":
            depth += 1
        elif key == ")":
            depth -= 1
        elif depth == 0 and key == words[0] and tuple(t.key for t in toks[i : i + n]) == words:
            tk.i = i + n
            return True
        i += 1
    tk.i = i
    return False


def _trigger(tk: _Tokens, db: str, f: _Found) -> None:
    """CREATE TRIGGER [db.]name {BEFORE|AFTER} event ON table: the table is in the trigger's database."""
    _if_exists(tk)
    t = _qualified(tk, db)
    if t is None:
        return
    f.databases.append(t[0])
    if _skip_to(tk, "ON") and (table := _qualified(tk, t[0])) is not None:
        f.tables.append(table)


def _index_on(tk: _Tokens, db: str, f: _Found) -> None:
    _if_exists(tk)
    _name(tk)
    if _skip_to(tk, "ON") and (t := _qualified(tk, db)) is not None:
        f.tables.append(t)


_DML_MODIFIERS = frozenset({"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "QUICK", "INTO"})


def _dml_target(tk: _Tokens, db: str, f: _Found) -> None:
    """INSERT/REPLACE [INTO] t, UPDATE t, DELETE FROM t: the first table (statement-format rows)."""
    while tk.word() in _DML_MODIFIERS:
        tk.i += 1
    tk.accept("FROM")
    _one_table(tk, db, f)


def _load(tk: _Tokens, db: str, f: _Found) -> None:
    if _skip_to(tk, "INTO", "TABLE"):
        _one_table(tk, db, f)


def _xid_part(tk: _Tokens) -> bytes | None:
    """One part of an XA id: a string, X'hex', 0xhex, B'bits' or _charset'string'; None if not one."""
    t = tk.take()
    if t is None:
        return None
    nxt = tk.peek()
    glued = nxt is not None and nxt.kind == "s" and nxt.start == t.end
    try:
        if t.kind == "w" and glued and t.word in ("X", "B"):
            tk.i += 1
            body = _unquote(nxt.text)  # type: ignore[union-attr]
            if t.word == "X":
                return bytes.fromhex(body)
            return int(body or "0", 2).to_bytes((len(body) + 7) // 8, "big")
        if t.kind == "w" and t.text[:2].lower() == "0x":
            return bytes.fromhex(t.text[2:])
    except ValueError:
        return None
    if t.kind == "w" and t.text.startswith("_") and glued:  # an introducer: _utf8'..'
        return _xid_part(tk)
    if t.kind == "s":
        return _unquote(t.text).encode()
    return None


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        return 1


def _xa(tk: _Tokens, db: str, f: _Found) -> None:
    """xid: gtrid [, bqual [, formatID]] (formatID 1 unless given); XA COMMIT … ONE PHASE."""
    gtrid = _xid_part(tk)
    if gtrid is None:
        return
    bqual, format_id = b"", 1
    if tk.punct(","):
        bqual = _xid_part(tk) or b""
        if tk.punct(","):
            t = tk.take()
            format_id = _int(t.text) if t is not None and t.kind == "w" else 1
    f.xid = XaId(format_id, gtrid, bqual)
    f.one_phase = tk.accept("ONE", "PHASE")


# ALTER TABLE actions that keep the row layout (indexes, options); a first action of partition or
# tablespace maintenance makes the whole statement neutral (its commas list partitions)
_NEUTRAL_ACTIONS = frozenset(
    {
        ("ENGINE",), ("AUTO_INCREMENT",), ("COMMENT",), ("FORCE",), ("ROW_FORMAT",), ("KEY_BLOCK_SIZE",),
        ("ALGORITHM",), ("LOCK",), ("PACK_KEYS",), ("CHECKSUM",), ("DELAY_KEY_WRITE",), ("MAX_ROWS",),
        ("MIN_ROWS",), ("AVG_ROW_LENGTH",), ("ORDER", "BY"),
        ("ADD", "INDEX"), ("ADD", "KEY"), ("ADD", "UNIQUE"), ("ADD", "FULLTEXT"), ("ADD", "SPATIAL"),
        ("DROP", "INDEX"), ("DROP", "KEY"), ("DROP", "FOREIGN"), ("DROP", "CHECK"), ("DROP", "CONSTRAINT"),
        ("RENAME", "INDEX"), ("RENAME", "KEY"), ("ALTER", "INDEX"),
    }
)  # fmt: skip
_PARTITION_OPS = frozenset(
    {
        *((op, "PARTITION") for op in (
            "ADD", "DROP", "DISCARD", "IMPORT", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD", "REPAIR",
            "TRUNCATE", "COALESCE", "REORGANIZE", "EXCHANGE", "CONVERT",
        )),
        ("REMOVE", "PARTITIONING"), ("PARTITION", "BY"), ("DISCARD", "TABLESPACE"), ("IMPORT", "TABLESPACE"),
        ("DISABLE", "KEYS"), ("ENABLE", "KEYS"),
    }
)  # fmt: skip


def _alter_table(tk: _Tokens, db: str, f: _Found) -> None:
    _if_exists(tk)
    table = _qualified(tk, db)
    if table is None:
        return
    f.tables.append(table)
    neutral, first = True, True
    while tk.peek() is not None:
        head = (tk.word(), tk.word(1))
        f.actions.append(" ".join(w for w in head if w))
        if first and head in _PARTITION_OPS:
            f.layout_neutral = True
            return
        first = False
        if head[0] == "CHANGE" or head == ("RENAME", "COLUMN"):
            f.renames_columns = True
        elif head[0] == "RENAME" and head[1] not in ("INDEX", "KEY"):
            tk.i += 1
            tk.accept("TO") or tk.accept("AS")
            new = _qualified(tk, db)  # unqualified: in the default database, as the server reads it
            if new is not None:
                f.renames.append((table, new))
                f.tables.append(new)
        if head[:1] not in _NEUTRAL_ACTIONS and head not in _NEUTRAL_ACTIONS:
            neutral = neutral and (head[0] or "").startswith("STATS_")
        if not _skip_to(tk, ","):
            break
    f.layout_neutral = neutral


_Parser = Callable[[_Tokens, str, _Found], None]
_Head = tuple[Kind, Ddl | None, _Parser]


def _ddl(ddl: Ddl, parser: _Parser = _routine) -> _Head:
    return (Kind.DDL, ddl, parser)


# leading keywords (modifiers such as TEMPORARY, OR REPLACE, DEFINER=… skipped) -> what the statement is
_HEADS: dict[tuple[str, ...], _Head] = {
    ("BEGIN",): (Kind.BEGIN, None, _nothing),
    ("START", "TRANSACTION"): (Kind.BEGIN, None, _nothing),
    ("COMMIT",): (Kind.COMMIT, None, _nothing),
    ("ROLLBACK",): (Kind.ROLLBACK, None, _nothing),
    ("ROLLBACK", "TO"): (Kind.ROLLBACK_TO_SAVEPOINT, None, _nothing),
    ("SAVEPOINT",): (Kind.SAVEPOINT, None, _nothing),
    ("RELEASE", "SAVEPOINT"): (Kind.RELEASE_SAVEPOINT, None, _nothing),
    **{
        ("XA", verb): (kind, None, _xa)
        for verb, kind in (
            ("START", Kind.XA_START), ("BEGIN", Kind.XA_START), ("END", Kind.XA_END), ("PREPARE", Kind.XA_PREPARE),
            ("COMMIT", Kind.XA_COMMIT), ("ROLLBACK", Kind.XA_ROLLBACK),
        )
    },
    ("CREATE", "TABLE"): _ddl(Ddl.CREATE_TABLE, _one_table),
    ("ALTER", "TABLE"): _ddl(Ddl.ALTER_TABLE, _alter_table),
    **{("DROP", noun): _ddl(Ddl.DROP_TABLE, _table_list) for noun in ("TABLE", "TABLES")},
    **{("RENAME", noun): _ddl(Ddl.RENAME_TABLE, _rename_pairs) for noun in ("TABLE", "TABLES")},
    **{key: _ddl(Ddl.TRUNCATE_TABLE, _one_table) for key in (("TRUNCATE",), ("TRUNCATE", "TABLE"))},
    **{
        (verb, noun): _ddl(ddl, _database)
        for verb, ddl in (("CREATE", Ddl.CREATE_DATABASE), ("ALTER", Ddl.ALTER_DATABASE), ("DROP", Ddl.DROP_DATABASE))
        for noun in ("DATABASE", "SCHEMA")
    },
    ("CREATE", "INDEX"): _ddl(Ddl.CREATE_INDEX, _index_on),
    ("DROP", "INDEX"): _ddl(Ddl.DROP_INDEX, _index_on),
    ("CREATE", "VIEW"): _ddl(Ddl.VIEW, _one_table),
    ("ALTER", "VIEW"): _ddl(Ddl.VIEW, _one_table),
    ("DROP", "VIEW"): _ddl(Ddl.VIEW, _table_list),
    ("CREATE", "TRIGGER"): _ddl(Ddl.TRIGGER, _trigger),
    ("DROP", "TRIGGER"): _ddl(Ddl.TRIGGER),
    **{
        (verb, noun): _ddl(ddl)
        for verb in ("CREATE", "ALTER", "DROP")
        for noun, ddl in (
            ("PROCEDURE", Ddl.ROUTINE), ("FUNCTION", Ddl.ROUTINE), ("PACKAGE", Ddl.ROUTINE), ("EVENT", Ddl.EVENT),
        )
    },
    **{(verb, "SEQUENCE"): _ddl(Ddl.SEQUENCE, _table_list) for verb in ("CREATE", "ALTER", "DROP")},
    **{
        key: _ddl(Ddl.ACCOUNT, _nothing)
        for key in (
            ("CREATE", "USER"), ("ALTER", "USER"), ("DROP", "USER"), ("RENAME", "USER"), ("CREATE", "ROLE"),
            ("DROP", "ROLE"), ("GRANT",), ("REVOKE",), ("SET", "PASSWORD"), ("SET", "DEFAULT", "ROLE"),
        )
    },
    **{(verb, "TABLE"): _ddl(Ddl.MAINTENANCE, _table_list) for verb in ("ANALYZE", "OPTIMIZE", "REPAIR", "CHECK")},
    **{
        (verb,): _ddl(Ddl.OTHER, _nothing)
        for verb in ("CREATE", "ALTER", "DROP", "RENAME", "FLUSH", "INSTALL", "UNINSTALL")
    },
    ("INSERT",): (Kind.DML, None, _dml_target),
    ("REPLACE",): (Kind.DML, None, _dml_target),
    ("UPDATE",): (Kind.DML, None, _dml_target),
    ("DELETE",): (Kind.DML, None, _dml_target),
    ("LOAD", "DATA"): (Kind.DML, None, _load),
    ("LOAD", "XML"): (Kind.DML, None, _load),
    ("CALL",): (Kind.DML, None, _routine),
    ("DO",): (Kind.DML, None, _nothing),
    ("SELECT",): (Kind.DML, None, _nothing),
    ("WITH",): (Kind.DML, None, _nothing),
    ("SET",): (Kind.SET, None, _nothing),
}  # fmt: skip
_PREFIXES = frozenset(key[:n] for key in _HEADS for n in range(1, len(key)))  # worth reading on

# words between the leading keywords that do not change what a statement is
_MODIFIERS = frozenset(
    {"TEMPORARY", "ONLINE", "OFFLINE", "IGNORE", "UNIQUE", "FULLTEXT", "SPATIAL", "AGGREGATE", "WORK",
     "NO_WRITE_TO_BINLOG", "LOCAL", "LOW_PRIORITY", "CONCURRENT", "NONBLOCKING"}
)  # fmt: skip


def _skip_modifier(tk: _Tokens) -> str | None:
    """Skip one modifier (with its value: DEFINER = user, ALGORITHM = x, SQL SECURITY x, OR REPLACE);
    the modifier's word, or None when none comes next."""
    w = tk.word()
    if w in _MODIFIERS:
        tk.i += 1
    elif w == "OR" and tk.word(1) == "REPLACE":
        tk.i += 2
    elif w == "SQL" and tk.word(1) == "SECURITY":
        tk.i += 3
    elif w in ("DEFINER", "ALGORITHM") and (p := tk.peek(1)) is not None and p.text == "=":
        tk.i += 3
        if tk.punct("@"):
            tk.i += 1
        if tk.punct("("):
            tk.punct(")")
    else:
        return None
    return w


def _head(tk: _Tokens) -> tuple[_Head | None, bool]:
    """The longest entry of ``_HEADS`` the statement starts with (tokens consumed up to its end),
    and whether TEMPORARY was among the modifiers."""
    words: list[str] = []
    ends: list[int] = []
    temporary = False
    while not words or tuple(words) in _PREFIXES:
        if words and (m := _skip_modifier(tk)) is not None:
            temporary |= m == "TEMPORARY"
            continue
        w = tk.word()
        if w is None:
            break
        words.append(w)
        tk.i += 1
        ends.append(tk.i)
    for n in range(len(words), 0, -1):
        found = _HEADS.get(tuple(words[:n]))
        if found is not None:
            tk.i = ends[n - 1]
            return found, temporary
    return None, temporary


def _unique(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


# XA statements exactly as a server writes them to its binlog (``XA START X'..',X'..',1``): one per
# XA event group of a sharded cluster, read without the tokenizer (the same result, 10x faster). The
# form, as a regular expression (the tests check ``xa_canonical`` against it):
#   XA (START|BEGIN|END|PREPARE|COMMIT|ROLLBACK) X'((?:[0-9a-fA-F]{2})*)',X'((?:[0-9a-fA-F]{2})*)',
#   (0|[1-9][0-9]{0,9})( ONE PHASE)?
_XA_VERBS = {
    verb: _HEADS["XA", verb][0] for verb in ("START", "BEGIN", "END", "PREPARE", "COMMIT", "ROLLBACK")
}
_ONE_PHASE = " ONE PHASE"


def _hex(quoted: str) -> bytes | None:
    """``X'<pairs of hex digits>'`` -> its bytes (None: not that)."""
    if len(quoted) < 3 or quoted[:2] != "X'" or quoted[-1] != "'":
        return None
    digits = quoted[2:-1]
    if digits and not (digits.isascii() and digits.isalnum()):  # fromhex would skip blanks
        return None
    try:
        return bytes.fromhex(digits) if len(digits) % 2 == 0 else None
    except ValueError:
        return None


def xa_canonical(query: str) -> tuple[Kind, XaId, bool] | None:
    """A canonical XA statement's kind, id and ONE PHASE, read with string operations (the
    regular expression took half the time of the node reader's statements); None when ``query``
    is not in that form (the tokenizer reads it then)."""
    if query[:3] != "XA ":
        return None
    blank = query.find(" ", 3)
    kind = _XA_VERBS.get(query[3:blank]) if blank > 0 else None
    if kind is None:
        return None
    one_phase = query.endswith(_ONE_PHASE)
    ids = query[blank + 1 : len(query) - len(_ONE_PHASE) if one_phase else len(query)].split(",")
    if len(ids) != 3:
        return None
    gtrid, bqual, fmt = ids
    if not (fmt.isascii() and fmt.isdigit() and len(fmt) <= 10 and (fmt[0] != "0" or fmt == "0")):
        return None
    g, b = _hex(gtrid), _hex(bqual)
    if g is None or b is None:
        return None
    return kind, XaId(int(fmt), g, b), one_phase


def _xa_statement(query: str) -> Statement | None:
    found = xa_canonical(query)
    if found is None:
        return None
    kind, xid, one_phase = found
    return Statement(kind, xid=xid, one_phase=one_phase)


def classify(query: str, default_db: str = "") -> Statement:
    """What one statement is, and the tables and databases it touches (unqualified names are in
    ``default_db``). Never raises: text it cannot read is ``Kind.UNKNOWN``."""
    simple = _SIMPLE.get(query)
    if simple is not None:
        return simple
    if query[:3] == "XA " and (xa := _xa_statement(query)) is not None:
        return xa
    tk = _Tokens(query)
    head, temporary = _head(tk)
    if head is None:
        return _UNKNOWN
    kind, ddl, parser = head
    if parser is _nothing and not temporary:
        return _PLAIN[kind, ddl]
    f = _Found([], [], [])
    parser(tk, default_db, f)
    tables = tuple(dict.fromkeys(f.tables))
    return Statement(
        kind,
        ddl,
        tables,
        _unique([t[0] for t in tables] + f.databases),
        tuple(f.renames),
        f.xid,
        temporary,
        f.one_phase,
        f.layout_neutral,
        f.renames_columns,
        tuple(f.actions),
    )


_UNKNOWN = Statement(Kind.UNKNOWN)
_PLAIN = {
    (kind, ddl): Statement(kind, ddl) for kind, ddl, _ in _HEADS.values()
}  # nothing to read after the keywords
# the statements most Query events hold, answered without reading them
_SIMPLE = {
    text: Statement(kind)
    for word, kind in (("BEGIN", Kind.BEGIN), ("COMMIT", Kind.COMMIT), ("ROLLBACK", Kind.ROLLBACK))
    for text in (word, word.lower())
}
