"""Logical names: the physical shard tables of a sharded database (PolarDB-X ``d1_p00000.t_jg_tag_ynub``)
shown as their logical table (``d1.t_jg_tag``), hidden shard columns (``_drds_implicit_id_``) dropped,
so every consumer of the global binlog sees one table, not N (issue #17 item 9; PolarDB-X CDC does
this in ``TableMapEventReformator`` from its metadata, we do it from a map or a naming rule).

Where the names come from:

- a **map file** (``--logical-map FILE``), one rule a line, first match wins::

      # physical db.table (globs: * ? [..])   logical db.table   [drop=COLUMN,...]
      d1_p*.t_jg_tag_ynub                      d1.t_jg_tag
      shop_p*.orders_*_[0-9][0-9][0-9][0-9][0-9]  shop.orders     drop=_drds_implicit_id_
      legacy_*.acct_*                          bank.acct          drop=@3

  a column to drop is named (when the table map carries column names: MySQL 8 with
  ``binlog_row_metadata=FULL``) or given by position ``@N`` (1-based, as mariadb-binlog prints it;
  MySQL 5.7 nodes write no names);
- the **PolarDB-X naming rule** (``--logical-names polardbx``), for tables no map rule matches: a
  database ``<db>_p<NNNNN>`` (AUTO mode: one per partition group) is ``<db>``, and in it a table
  ``<table>_<xxxx>_<NNNNN>`` (a partition: four random letters or digits, five digits) or
  ``<table>_<xxxx>`` (a single or broadcast table) is ``<table>``; ``_drds_implicit_id_`` (the
  primary key PolarDB-X adds to a table created without one) is dropped where the map names
  columns. Databases of any other shape are left as they are.

DDL is renamed too (its default database, and the tables it names after TABLE, ON, REFERENCES, LIKE,
TO, INTO, FROM, JOIN or as ``db.table``), and the physical DDLs of one logical statement collapse
into one (``DdlCollapser``, item 10).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binlake.errors import BinlogError
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.globalbinlog.merge import GlobalTxn
from binlake.globalbinlog.sorter import DDL_KIND

IMPLICIT_ID = "_drds_implicit_id_"
_PHYS_DB = re.compile(r"^(?P<name>.+)_p\d{5}$")
_PARTITION = re.compile(r"^(?P<name>.+)_[A-Za-z0-9]{4}_\d{5}$")
_SINGLE = re.compile(r"^(?P<name>.+)_[A-Za-z0-9]{4}$")


class LogicalMapError(BinlogError):
    """A logical map that cannot be read or applied (a bad line, a column to drop that is not there)."""


@dataclass(frozen=True)
class Target:
    """The logical table a physical one is shown as, and the columns left out of it."""

    database: str
    table: str
    drop: tuple[str | int, ...] = ()  # column names, or 1-based positions
    if_named: bool = False  # drop only what the table map names (the naming rule's default)


@dataclass(frozen=True)
class MapRule:
    physical_db: str  # globs
    physical_table: str
    target: Target

    def matches(self, db: str, table: str) -> bool:
        return fnmatch.fnmatchcase(db, self.physical_db) and fnmatch.fnmatchcase(table, self.physical_table)


def _split_name(text: str, line: int) -> tuple[str, str]:
    db, dot, table = text.replace("`", "").partition(".")
    if not dot or not db or not table:
        raise LogicalMapError(f"logical map line {line}: {text!r} is not db.table")
    return db, table


def parse_map(text: str) -> list[MapRule]:
    """The rules of a logical map file (format: module docstring)."""
    rules = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) not in (2, 3) or (len(parts) == 3 and not parts[2].startswith("drop=")):
            raise LogicalMapError(
                f"logical map line {n}: expected 'physical_db.table logical_db.table [drop=col,@N]', got {raw!r}"
            )
        pdb, ptable = _split_name(parts[0], n)
        ldb, ltable = _split_name(parts[1], n)
        drop: list[str | int] = []
        for col in parts[2].removeprefix("drop=").split(",") if len(parts) == 3 else []:
            if col.startswith("@"):
                if not col[1:].isdigit() or int(col[1:]) < 1:
                    raise LogicalMapError(f"logical map line {n}: bad column position {col!r}")
                drop.append(int(col[1:]))
            elif col:
                drop.append(col)
        rules.append(MapRule(pdb, ptable, Target(ldb, ltable, tuple(drop))))
    return rules


def polardbx_name(db: str, table: str) -> Target | None:
    """The PolarDB-X AUTO-mode naming rule (module docstring); None: not a physical shard name."""
    m = _PHYS_DB.match(db)
    if not m:
        return None
    t = _PARTITION.match(table) or _SINGLE.match(table)
    return Target(m["name"], t["name"] if t else table, (IMPLICIT_ID,), if_named=True)


@dataclass
class LogicalNames:
    """Physical -> logical names for table maps, rows and DDL of the merged stream."""

    rules: list[MapRule] = field(default_factory=list)
    derive: bool = False  # the PolarDB-X naming rule for what no rule matches
    _cache: dict[tuple[str, str], Target | None] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, path: str | Path | None = None, derive: bool = False) -> LogicalNames:
        return cls(parse_map(Path(path).read_text()) if path else [], derive)

    def target(self, db: str, table: str) -> Target | None:
        """What ``db.table`` is shown as; None: itself."""
        key = (db, table)
        if key not in self._cache:
            hit = next((r.target for r in self.rules if r.matches(db, table)), None)
            if hit is None and self.derive:
                hit = polardbx_name(db, table)
            self._cache[key] = hit
        return self._cache[key]

    def database(self, db: str) -> str:
        """A physical database's logical name (for DDL's default database)."""
        for r in self.rules:
            if fnmatch.fnmatchcase(db, r.physical_db):
                return r.target.database
        m = _PHYS_DB.match(db) if self.derive else None
        return m["name"] if m else db

    # ---- row events ------------------------------------------------------------------------------

    def table_map(self, tm: TableMap) -> tuple[TableMap, tuple[int, ...]]:
        """The logical table map (same table id: rows still point at it) and the 0-based
        indexes of the physical columns left out."""
        t = self.target(tm.database, tm.table)
        if t is None:
            return tm, ()
        dropped = _dropped(tm, t)
        if not dropped and (tm.database, tm.table) == (t.database, t.table):
            return tm, ()
        keep = [i for i in range(len(tm.columns)) if i not in dropped]
        new_index = {old: new for new, old in enumerate(keep)}
        return (
            tm.replaced(
                database=t.database,
                table=t.table,
                columns=[dataclasses.replace(tm.columns[old], index=new) for new, old in enumerate(keep)],
                primary_key=[new_index[i] for i in tm.primary_key if i in new_index],
                primary_key_prefixes={
                    new_index[i]: n for i, n in tm.primary_key_prefixes.items() if i in new_index
                },
            ),
            dropped,
        )

    def txn(self, g: GlobalTxn) -> GlobalTxn:
        """``g`` with logical names (a new transaction; ``g`` is left as it is)."""
        pieces = []
        for p in g.pieces:
            maps: dict[int, tuple[TableMap, tuple[int, ...]]] = {}
            events = []
            for e in p.events:
                b = e.body
                if isinstance(b, TableMap):
                    maps[b.table_id] = self.table_map(b)
                    b = maps[b.table_id][0]
                elif isinstance(b, Rows) and b.table_id in maps:
                    b = _rows(b, *maps[b.table_id])
                elif isinstance(b, Query) and g.kind == DDL_KIND:
                    b = self.query(b)
                events.append(e if b is e.body else dataclasses.replace(e, body=b))
            pieces.append(dataclasses.replace(p, events=events))
        return dataclasses.replace(g, pieces=pieces)

    def stream(self, txns: Iterable[GlobalTxn]) -> Iterator[GlobalTxn]:
        for g in txns:
            yield self.txn(g)

    # ---- DDL ------------------------------------------------------------------------------------

    def query(self, q: Query) -> Query:
        """A DDL statement with logical names: its default database and the tables it names."""
        sql = rename_tables(q.query, q.database, self)
        status = dict(q.status)
        if status.get("updated_db_names"):
            status["updated_db_names"] = sorted({self.database(d) for d in status["updated_db_names"]})
        db = self.database(q.database) if q.database else q.database
        if (sql, db, status) == (q.query, q.database, q.status):
            return q
        return dataclasses.replace(q, query=sql, database=db, status=status)


def _dropped(tm: TableMap, t: Target) -> tuple[int, ...]:
    names = {c.name: c.index for c in tm.columns if c.name is not None}
    out = set()
    for col in t.drop:
        if isinstance(col, int):
            if col > len(tm.columns):
                raise LogicalMapError(
                    f"{tm.database}.{tm.table} has {len(tm.columns)} columns: cannot drop @{col}"
                )
            out.add(col - 1)
        elif col in names:
            out.add(names[col])
        elif names or t.if_named:  # the map names its columns and this one is not there: nothing to drop
            continue
        else:
            raise LogicalMapError(
                f"{tm.database}.{tm.table}: the binlog names no columns (MySQL 5.7, or "
                f"binlog_row_metadata=MINIMAL): drop {col!r} by position (drop=@N)"
            )
    return tuple(sorted(out))


def _without(bitmap: int, dropped: tuple[int, ...]) -> int:
    for i in reversed(dropped):  # highest first: lower bits keep their place
        bitmap = (bitmap & ((1 << i) - 1)) | ((bitmap >> (i + 1)) << i)
    return bitmap


def _rows(r: Rows, tm: TableMap, dropped: tuple[int, ...]) -> Rows:
    if not dropped:
        return dataclasses.replace(r, table=tm)
    if r.raw_rows is not None:
        raise LogicalMapError(
            f"rows of {r.table.database if r.table else '?'}.{r.table.table if r.table else '?'} were not "
            f"decoded ({r.undecoded_reason}): hidden columns cannot be dropped from them"
        )

    def cut(image: list[Any] | None) -> list[Any] | None:
        return None if image is None else [v for i, v in enumerate(image) if i not in dropped]

    return dataclasses.replace(
        r,
        table=tm,
        column_count=r.column_count - len(dropped),
        columns_before=_without(r.columns_before, dropped),
        columns_after=_without(r.columns_after, dropped),
        rows=[(cut(b), cut(a)) for b, a in r.rows],
    )


# ---- table names in DDL text ---------------------------------------------------------------------

_TOKEN = re.compile(
    r"""(?P<skip>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*"|/\*.*?\*/|--[^\n]*|\#[^\n]*)"""
    r"""|(?P<name>(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+))?)"""
    r"""|(?P<other>\S)""",
    re.S,
)
_TABLE_KEYWORDS = frozenset({"TABLE", "TABLES", "ON", "REFERENCES", "LIKE", "TO", "INTO", "FROM", "JOIN"})
_SKIP_KEYWORDS = frozenset({"IF", "NOT", "EXISTS"})


def _unquote(part: str) -> str:
    part = part.strip()
    return part[1:-1].replace("``", "`") if part.startswith("`") else part


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def rename_tables(sql: str, default_db: str, names: LogicalNames) -> str:
    """``sql`` with the physical tables it names replaced by their logical names: names after the
    keywords that introduce tables (a comma goes on with the list) and every ``db.table``."""
    out, last, expect, in_list = [], 0, False, False
    for m in _TOKEN.finditer(sql):
        if m["skip"]:
            continue
        if m["other"]:
            expect = expect or (in_list and m["other"] == ",")
            in_list = False
            continue
        word = m["name"]
        upper = word.upper()
        if upper in _TABLE_KEYWORDS:
            expect, in_list = True, False
            continue
        if expect and upper in _SKIP_KEYWORDS:
            continue
        parts = [_unquote(p) for p in re.split(r"\s*\.\s*(?=(?:`|[A-Za-z0-9_$]))", word, maxsplit=1)]
        qualified = len(parts) == 2
        if expect or qualified:
            db, table = parts if qualified else (default_db, parts[0])
            t = names.target(db, table)
            if t is not None and (t.database, t.table) != (db, table):
                new = f"{_quote(t.database)}.{_quote(t.table)}" if qualified else _quote(t.table)
                out.append(sql[last : m.start()] + new)
                last = m.end()
        in_list = expect
        expect = False
    return "".join(out) + sql[last:]


# ---- one DDL per logical change (item 10) --------------------------------------------------------

_TSO_HINT = re.compile(r"/\*\s*TSO\s*=\s*(\d+)\s*\*/")
_HINTS = re.compile(r"/\*\s*(?:TSO\s*=|DRDS\s|\+TDDL)[^*]*\*/")  # the CN's hints: differ per shard


def _statement(sql: str) -> str:
    """A DDL's text without the CN's per-shard hints, whitespace folded: the logical statement."""
    return " ".join(_HINTS.sub(" ", sql).split())


DDL_MEMORY = 10_000  # logical DDL groups remembered


@dataclass
class DdlCollapser:
    """The physical DDLs of one logical statement become one (the first, where it came in the
    stream). Two physical DDLs are one logical statement when their logical text and database are
    equal and either they carry one TSO (the snapshot TSO a PolarDB-X node writes before DDL — a
    GCN or Sequence event —, or a ``/*TSO=…*/`` hint of the CN) or, without one, they are one DDL
    group: no physical table of the group ran the statement before (a repeat on a shard that
    already ran it is a new logical DDL). Deterministic over the stream, so a rerun collapses the
    same way; the last ``DDL_MEMORY`` groups are remembered."""

    groups: OrderedDict[tuple[Any, ...], set[tuple[str, str, str]]] = field(default_factory=OrderedDict)
    collapsed: int = 0  # physical DDLs left out

    def keep(self, g: GlobalTxn, physical: GlobalTxn) -> bool:
        """Whether ``g`` (logical names) opens a logical DDL; ``physical``: the same before renaming."""
        if g.kind != DDL_KIND:
            return True
        qs = [e.body for e in g.events if isinstance(e.body, Query)]
        pqs = [e.body for e in physical.events if isinstance(e.body, Query)]
        if not qs:
            return True
        p = physical.pieces[0]
        hint = _TSO_HINT.search(pqs[0].query)
        tso = int(hint[1]) if hint else p.snapshot
        text = tuple(_statement(q.query) for q in qs)
        key = (tso, qs[0].database, text)
        shard = (p.node, pqs[0].database, _statement(pqs[0].query))
        seen = self.groups.get(key)
        if seen is None or (tso is None and shard in seen):
            self.groups[key] = {shard}
            self.groups.move_to_end(key)
            while len(self.groups) > DDL_MEMORY:
                self.groups.popitem(last=False)
            return True
        seen.add(shard)
        self.collapsed += 1
        return False


@dataclass
class LogicalView:
    """The merged stream as logical tables: names mapped, one DDL per logical change. Its state
    (the DDL groups) goes into a merge's checkpoint."""

    names: LogicalNames
    ddl: DdlCollapser = field(default_factory=DdlCollapser)

    def __call__(self, txns: Iterable[GlobalTxn]) -> Iterator[GlobalTxn]:
        for g in txns:
            out = self.names.txn(g)
            if self.ddl.keep(out, g):
                yield out
