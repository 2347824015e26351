"""The schema history: table definitions as of every position of a binlog series.

A seed (a DDL script, a live server's tables, or nothing) plus every DDL statement met in the binlog,
each at its position; ``at(position)`` replays them up to there. Persisted as JSON so a pipeline can
resume at a position with the right schema.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binlake.schema.ddl import Catalog, DdlNotUnderstood, apply_ddl, split_script
from binlake.schema.model import DEFAULT_CHARSET, TableDef
from binlake.values.charsets import codec_for

_CODEC_CHARSET = {
    "utf-8": "utf8mb4",
    "latin-1": "latin1",
    "gbk": "gbk",
    "big5": "big5",
    "ascii": "ascii",
    "cp1251": "cp1251",
    "utf-16-be": "utf16",
    "utf-32-be": "utf32",
    "euc-kr": "euckr",
    "shift_jis": "sjis",
    "gb18030": "gb18030",
}


def charset_of(collation: int | None) -> str | None:
    if collation is None:
        return None
    codec = codec_for(collation)
    return "binary" if codec is None else _CODEC_CHARSET.get(codec or "", DEFAULT_CHARSET)


Position = tuple[str, int]  # (file name, offset)


def position_order(p: Position) -> tuple[int, str, int]:
    """A position as it sorts in a series (``mysql-bin.1000000`` after ``mysql-bin.999999``)."""
    from binlake.changes import file_number

    return (file_number(p[0]), p[0], p[1])


@dataclass
class Change:
    position: Position
    database: str
    sql: str
    database_charset: str | None = None


@dataclass
class NotUnderstood:
    position: Position
    sql: str
    reason: str


@dataclass
class SchemaHistory:
    seed: Catalog = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    not_understood: list[NotUnderstood] = field(default_factory=list)
    server_charset: str = DEFAULT_CHARSET
    database_charsets: dict[str, str] = field(default_factory=dict)
    catalog: Catalog = field(default_factory=dict)
    position: Position = ("", 0)
    # the seed is the tables as of this position (a live server's catalog read there): DDL met
    # before it is in the seed already, so it is not applied again (None: the seed is as of the
    # series' start)
    seeded_at: Position | None = None
    # the positions of the statements applied in this run: a statement met again (a replica stream
    # re-sends a transaction cut by a reconnect: MySQL's CREATE TABLE … SELECT is one) is not
    # applied twice
    _applied: set[Position] = field(default_factory=set, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.catalog:
            self.catalog = copy.deepcopy(self.seed)

    # ---- seeds ------------------------------------------------------------------------------------

    @classmethod
    def from_ddl_script(
        cls, text: str, default_db: str = "", server_charset: str = DEFAULT_CHARSET
    ) -> SchemaHistory:
        """From ``mysqldump --no-data`` output or SHOW CREATE TABLE text (USE statements followed)."""
        h = cls(server_charset=server_charset)
        db = default_db
        for stmt in split_script(text):
            head = stmt.split(None, 1)[0].upper()
            if head == "USE":
                db = stmt.split(None, 1)[1].strip().strip("`")
                continue
            if head in ("CREATE", "ALTER", "DROP", "RENAME"):
                try:
                    applied = apply_ddl(h.catalog, stmt, db, h.database_charsets, server_charset)
                except DdlNotUnderstood as e:
                    h.not_understood.append(NotUnderstood(("<seed>", 0), stmt, str(e)))
                    continue
                # SHOW CREATE TABLE names no database: such a table would sit under '' and no
                # table map would ever find it
                nameless = [k for k in applied.tables if not k[0]]
                for k in nameless:
                    h.catalog.pop(k, None)
                if nameless:
                    h.not_understood.append(
                        NotUnderstood(
                            ("<seed>", 0),
                            stmt,
                            f"table `{nameless[0][1]}` names no database: write `db`.`table`, or "
                            "put USE db; before it (SHOW CREATE TABLE output names none)",
                        )
                    )
        h.seed = copy.deepcopy(h.catalog)
        return h

    # ---- updates ----------------------------------------------------------------------------------

    def apply(
        self, sql: str, database: str, position: Position, database_collation: int | None = None
    ) -> bool:
        """Apply a DDL statement met at ``position``; False (and a report) when it is not understood.
        A statement before ``seeded_at`` is in the seed already: nothing to do."""
        if self.seeded_at is not None and position_order(position) < position_order(self.seeded_at):
            return True
        if position in self._applied:
            return True
        cs = charset_of(database_collation)
        if database and cs and database not in self.database_charsets:
            self.database_charsets[database] = cs
        try:
            applied = apply_ddl(self.catalog, sql, database, self.database_charsets, self.server_charset)
        except (DdlNotUnderstood, KeyError, StopIteration) as e:
            self.not_understood.append(NotUnderstood(position, sql, str(e) or type(e).__name__))
            return False
        if applied.kind == "changed":
            self.changes.append(Change(position, database, sql, cs))
        self.position = position
        self._applied.add(position)
        return True

    def table(self, database: str, name: str) -> TableDef | None:
        return self.catalog.get((database, name))

    def at(self, position: Position) -> Catalog:
        """The tables as of ``position`` (the state after every change before it)."""
        catalog = copy.deepcopy(self.seed)
        charsets = dict(self.database_charsets)
        for ch in self.changes:
            if ch.position >= position:
                break
            try:
                apply_ddl(catalog, ch.sql, ch.database, charsets, self.server_charset)
            except DdlNotUnderstood:
                continue
        return catalog

    # ---- persistence ------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        def cat(c: Catalog) -> list[dict[str, Any]]:
            return [t.to_json() for t in c.values()]

        return {
            "version": 1,
            "server_charset": self.server_charset,
            "database_charsets": self.database_charsets,
            "seed": cat(self.seed),
            "changes": [
                {"file": c.position[0], "offset": c.position[1], "database": c.database, "sql": c.sql}
                for c in self.changes
            ],
            "position": list(self.position),
            **({"seeded_at": list(self.seeded_at)} if self.seeded_at is not None else {}),
            "tables": cat(self.catalog),
            "not_understood": [
                {"file": n.position[0], "offset": n.position[1], "sql": n.sql, "reason": n.reason}
                for n in self.not_understood
            ],
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        tmp = Path(f"{path}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1))
        os.replace(tmp, path)  # a crash never leaves half a history

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SchemaHistory:
        d = json.loads(Path(path).read_text())

        def cat(items: list[dict[str, Any]]) -> Catalog:
            return {(t["database"], t["name"]): TableDef.from_json(t) for t in items}

        return cls(
            seed=cat(d["seed"]),
            changes=[Change((c["file"], c["offset"]), c["database"], c["sql"]) for c in d["changes"]],
            not_understood=[
                NotUnderstood((n["file"], n["offset"]), n["sql"], n["reason"]) for n in d["not_understood"]
            ],
            server_charset=d["server_charset"],
            database_charsets=d["database_charsets"],
            catalog=cat(d["tables"]),
            position=(d["position"][0], d["position"][1]),
            seeded_at=(d["seeded_at"][0], d["seeded_at"][1]) if d.get("seeded_at") else None,
        )

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SchemaHistory:
        """A saved history (``.json``) or a DDL script (anything else)."""
        p = Path(path)
        if p.suffix == ".json":
            return cls.load(p)
        return cls.from_ddl_script(p.read_text(errors="replace"))
