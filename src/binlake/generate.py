"""A deterministic workload generator that writes binlogs of MySQL 5.7 / 8.0 / MariaDB shape, and
the truth a pipeline must reproduce (final table contents, every committed transaction).

OLTP-like: inserts, updates on hot keys, deletes, multi-statement transactions, rollbacks (absent
from the binlog), DDL (ADD / DROP / RENAME COLUMN, RENAME TABLE), group commits sharing
last_committed, and statement-start header timestamps that go backwards across transactions while
commit times only grow (seed 000). Memory stays bounded: key spaces are capped.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from binlake.events import encode_body
from binlake.events.control import Xid
from binlake.events.gtid import Gtid, MariaGtid
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.render.values import json_value
from binlake.values.columns import ColumnDef
from binlake.values.json_binary import Json
from binlake.values.types import ColumnType
from binlake.writer import FLAVORS, BinlogWriter

UTF8MB4 = 255
BINARY = 63
UTC = dt.UTC
MARIA_FL_TRANSACTIONAL = 4
MARIA_FL_GROUP_COMMIT_ID = 2
MARIA_FL_STANDALONE = 1


@dataclass
class Column:
    name: str
    type_code: int
    meta: int = 0
    unsigned: bool | None = None
    collation: int | None = None
    enum_values: list[str] | None = None
    set_values: list[str] | None = None
    nullable: bool = True
    sql: str = ""


def _schema(flavor: str, json_type: bool = True) -> dict[str, list[Column]]:
    json_col = (
        Column("meta", ColumnType.JSON, 4, sql="JSON")
        if flavor != "mariadb" and json_type
        else Column("meta", ColumnType.BLOB, 4, collation=UTF8MB4, sql="LONGTEXT")
    )
    return {
        "customers": [
            Column("id", ColumnType.LONG, nullable=False, sql="INT NOT NULL"),
            Column("name", ColumnType.VARCHAR, 256, collation=UTF8MB4, sql="VARCHAR(64)"),
            Column("balance", ColumnType.NEWDECIMAL, (12 << 8) | 2, sql="DECIMAL(12,2)"),
            Column("joined", ColumnType.DATE, sql="DATE"),
            Column(
                "tier",
                ColumnType.STRING,
                (ColumnType.ENUM << 8) | 1,
                collation=UTF8MB4,
                enum_values=["basic", "gold", "platinum"],
                sql="ENUM('basic','gold','platinum')",
            ),
            Column(
                "tags",
                ColumnType.STRING,
                (ColumnType.SET << 8) | 1,
                collation=UTF8MB4,
                set_values=["a", "b", "c"],
                sql="SET('a','b','c')",
            ),
            Column("updated", ColumnType.TIMESTAMP2, 3, sql="TIMESTAMP(3) NULL"),
        ],
        "orders": [
            Column("id", ColumnType.LONGLONG, unsigned=True, nullable=False, sql="BIGINT UNSIGNED NOT NULL"),
            Column("customer_id", ColumnType.LONG, sql="INT"),
            Column("total", ColumnType.NEWDECIMAL, (14 << 8) | 4, sql="DECIMAL(14,4)"),
            Column("placed", ColumnType.DATETIME2, 6, sql="DATETIME(6)"),
            Column("qty", ColumnType.SHORT, unsigned=True, sql="SMALLINT UNSIGNED"),
            Column("note", ColumnType.BLOB, 2, collation=UTF8MB4, sql="TEXT"),
            json_col,
            Column("flag", ColumnType.BIT, 3, sql="BIT(3)"),
        ],
        "alltypes": [
            Column("id", ColumnType.LONG, nullable=False, sql="INT NOT NULL"),
            Column("ti", ColumnType.TINY, unsigned=False, sql="TINYINT"),
            Column("tiu", ColumnType.TINY, unsigned=True, sql="TINYINT UNSIGNED"),
            Column("mi", ColumnType.INT24, unsigned=False, sql="MEDIUMINT"),
            Column("bi", ColumnType.LONGLONG, unsigned=False, sql="BIGINT"),
            Column("biu", ColumnType.LONGLONG, unsigned=True, sql="BIGINT UNSIGNED"),
            Column("f", ColumnType.FLOAT, 4, sql="FLOAT"),
            Column("d", ColumnType.DOUBLE, 8, sql="DOUBLE"),
            Column("y", ColumnType.YEAR, sql="YEAR"),
            Column("t", ColumnType.TIME2, 6, sql="TIME(6)"),
            Column("dt0", ColumnType.DATETIME2, 0, sql="DATETIME"),
            Column("c", ColumnType.STRING, (0xFE << 8) | 40, collation=UTF8MB4, sql="CHAR(10)"),
            Column("bn", ColumnType.STRING, (0xFE << 8) | 4, collation=BINARY, sql="BINARY(4)"),
            Column("vb", ColumnType.VARCHAR, 16, collation=BINARY, sql="VARBINARY(16)"),
            Column("bl", ColumnType.BLOB, 2, collation=BINARY, sql="BLOB"),
            Column("dec", ColumnType.NEWDECIMAL, (30 << 8) | 10, sql="DECIMAL(30,10)"),
            Column("b64", ColumnType.BIT, 8 << 8, sql="BIT(64)"),
        ],
    }


def _value(rng: random.Random, col: Column, key: int) -> Any:
    """A random valid value of the column's type (NULL sometimes for nullable columns)."""
    if col.nullable and rng.random() < 0.08:
        return None
    t = col.type_code
    real = (
        col.meta >> 8 if t == ColumnType.STRING and col.meta >> 8 in (ColumnType.ENUM, ColumnType.SET) else t
    )
    if real in (ColumnType.TINY, ColumnType.SHORT, ColumnType.INT24, ColumnType.LONG, ColumnType.LONGLONG):
        bits = {
            ColumnType.TINY: 8,
            ColumnType.SHORT: 16,
            ColumnType.INT24: 24,
            ColumnType.LONG: 32,
            ColumnType.LONGLONG: 64,
        }[real]
        if col.name == "id":
            return key
        if col.unsigned:
            return rng.choice([0, 1, (1 << bits) - 1, rng.randrange(1 << bits)])
        return rng.choice(
            [
                0,
                -1,
                -(1 << (bits - 1)),
                (1 << (bits - 1)) - 1,
                rng.randrange(-(1 << (bits - 1)), 1 << (bits - 1)),
            ]
        )
    if real == ColumnType.NEWDECIMAL:
        p, s = col.meta >> 8, col.meta & 0xFF
        digits = rng.randrange(10 ** min(p, 18))
        return Decimal(f"{'-' if rng.random() < 0.3 else ''}{digits}E-{s}") if s else Decimal(digits)
    if real == ColumnType.FLOAT:
        import struct

        return struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0]
    if real == ColumnType.DOUBLE:
        return rng.choice([0.1, -2.5e300, rng.uniform(-1e9, 1e9)])
    if real == ColumnType.YEAR:
        return rng.choice([0, 1901, 2155, rng.randrange(1901, 2156)])
    if real == ColumnType.DATE:
        return dt.date(1970, 1, 1) + dt.timedelta(days=rng.randrange(0, 25000))
    if real == ColumnType.TIME2:
        us = rng.randrange(-838 * 3600 * 10**6, 838 * 3600 * 10**6)
        return dt.timedelta(microseconds=us)
    if real == ColumnType.DATETIME2:
        fsp = col.meta
        us = rng.randrange(0, 10**6) // 10 ** (6 - fsp) * 10 ** (6 - fsp)
        return dt.datetime(2000, 1, 1) + dt.timedelta(seconds=rng.randrange(0, 10**9), microseconds=us)
    if real == ColumnType.TIMESTAMP2:
        fsp = col.meta
        us = rng.randrange(0, 10**6) // 10 ** (6 - fsp) * 10 ** (6 - fsp)
        return dt.datetime.fromtimestamp(rng.randrange(1, 2**31 - 1), UTC).replace(microsecond=us)
    if real == ColumnType.ENUM:
        return rng.choice(col.enum_values or [""])
    if real == ColumnType.SET:
        return tuple(v for v in col.set_values or [] if rng.random() < 0.5)
    if real == ColumnType.BIT:
        nbits = (col.meta >> 8) * 8 + (col.meta & 0xFF)
        return rng.randrange(1 << nbits)
    if real == ColumnType.JSON:
        return Json({"k": key, "v": [rng.randrange(100), "s\u00e9", None, True], "n": {"x": rng.random()}})
    if col.collation == BINARY:
        if real == ColumnType.STRING:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 4))).ljust(col.meta & 0xFF, b"\0")
        n = min(16 if real == ColumnType.VARCHAR else 64, col.meta if real == ColumnType.VARCHAR else 64)
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, n)))
    words = ["alpha", "beta", "gamma", "caf\u00e9", "\u4e2d\u6587", "it's", "back\\slash", "\U0001f600"]
    text = " ".join(rng.choice(words) for _ in range(rng.randrange(0, 4)))
    limit = {ColumnType.VARCHAR: col.meta // 4, ColumnType.STRING: (col.meta & 0xFF) // 4}.get(real, 1000)
    return text[:limit].rstrip(" ") if real == ColumnType.STRING else text[:limit]


@dataclass
class TxnTruth:
    gtid: str | None
    commit_us: int
    kind: str
    rows: int
    file: str = ""
    offset: int = 0


@dataclass
class GenConfig:
    seed: int = 1
    flavor: str = "mysql80"
    target_bytes: int = 2_000_000
    max_file_size: int | None = 1_000_000
    database: str = "shop"
    keys_per_table: int = 5000
    start_us: int = 1_700_000_000_000_000
    ddl_every: int = 400  # transactions between DDL statements
    rollback_rate: float = 0.05
    group_commit: int = 4  # at most this many transactions share a last_committed
    rows_per_event: int = 200
    json_type: bool = True  # False: JSON documents in a LONGTEXT column (tools without binary JSON)
    keep_transactions: bool = True  # also return the transaction truth in memory (not for huge runs)


@dataclass
class GenResult:
    files: list[Path]
    truth_dir: Path
    transactions: list[TxnTruth] = field(default_factory=list)
    tables: dict[str, list[Column]] = field(default_factory=dict)


class Generator:
    def __init__(self, cfg: GenConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.flavor = FLAVORS[cfg.flavor]
        self.tables = _schema(cfg.flavor, cfg.json_type)
        self.names = {t: t for t in self.tables}  # logical table -> current name (RENAME TABLE)
        self.state: dict[str, dict[int, list[Any]]] = {t: {} for t in self.tables}
        self.table_ids = {t: 100 + i for i, t in enumerate(self.tables)}
        self.sid = str(uuid.UUID(int=self.rng.getrandbits(128)))
        self.gno = 0
        self.seq = 0
        self.last_committed = 0
        self.group_left = 0
        self.now_us = cfg.start_us
        self.xid = 1000
        self.added = 0
        self._maps: dict[str, tuple[Any, TableMap]] = {}

    # ---- events -----------------------------------------------------------------------------

    def _table_map(self, table: str) -> TableMap:
        cols = [
            ColumnDef(
                i,
                c.type_code,
                c.meta,
                c.nullable,
                name=c.name if not self.flavor.name == "mysql57" else None,
                unsigned=c.unsigned if self.flavor.name != "mysql57" else None,
                collation=c.collation if self.flavor.name != "mysql57" else None,
                enum_values=c.enum_values if self.flavor.name != "mysql57" else None,
                set_values=c.set_values if self.flavor.name != "mysql57" else None,
            )
            for i, c in enumerate(self.tables[table])
        ]
        tm = TableMap(self.table_ids[table], 1, self.cfg.database, self.names[table], cols)
        if self.flavor.name != "mysql57":
            tm.has_optional_metadata = True
            tm.primary_key = [0]
            for c in cols:
                c.in_primary_key = c.index == 0
        return tm

    def _writer_table(self, table: str) -> TableMap:
        """The table map as the writer encodes it: full column knowledge, whatever the flavor shows.
        Built once per schema version (its column encoders are the expensive part)."""
        key = (table, self.names[table], tuple(c.name for c in self.tables[table]))
        cached = self._maps.get(table)
        if cached is not None and cached[0] == key:
            return cached[1]
        tm = self._table_map(table)
        for c, spec in zip(tm.columns, self.tables[table], strict=True):
            c.unsigned, c.collation = spec.unsigned, spec.collation
            c.enum_values, c.set_values = spec.enum_values, spec.set_values
        self._maps[table] = (key, tm)
        return tm

    def _gtid(self, commit_us: int) -> tuple[int, Any]:
        self.seq += 1
        if self.group_left <= 0:
            self.last_committed = self.seq - 1
            self.group_left = self.rng.randint(1, self.cfg.group_commit)
        self.group_left -= 1
        if self.flavor.mariadb:
            self.gno += 1
            flags = MARIA_FL_TRANSACTIONAL | MARIA_FL_GROUP_COMMIT_ID
            return EventType.MARIA_GTID, MariaGtid(
                self.gno, 0, 1, flags, commit_id=self.last_committed + 1000
            )
        self.gno += 1
        g = Gtid(
            flags=0, sid=self.sid, gno=self.gno, last_committed=self.last_committed, sequence_number=self.seq
        )
        if self.flavor.commit_timestamps:
            g.immediate_commit_timestamp = g.original_commit_timestamp = commit_us
            g.transaction_length = 0
            g.immediate_server_version = g.original_server_version = 80036
        return EventType.GTID, g

    def _query(self, sql: str, ts: int, database: str = "") -> tuple[int, Query, int]:
        status: dict[str, Any] = {
            "flags2": 0,
            "sql_mode": 0,
            "catalog_nz": "std",
            "charset": {"client": 45, "connection": 45, "server": 45},
        }
        return EventType.QUERY, Query(1, 0, 0, database, sql, status), ts

    # ---- workload -----------------------------------------------------------------------------

    def _change(self, table: str) -> tuple[str, list[Any] | None, list[Any] | None]:
        rows = self.state[table]
        key = self.rng.randrange(1, self.cfg.keys_per_table + 1)
        hot = self.rng.random() < 0.5 and rows
        if hot:
            key = self.rng.choice(list(rows)[:50]) if len(rows) > 0 else key
        cols = self.tables[table]
        if key in rows:
            if self.rng.random() < 0.2:
                return "delete", rows[key], None
            new = list(rows[key])
            for i in self.rng.sample(range(1, len(cols)), k=min(2, len(cols) - 1)):
                new[i] = _value(self.rng, cols[i], key)
            return "update", rows[key], new
        return "insert", None, [_value(self.rng, c, key) for c in cols]

    def _ddl(self) -> tuple[str, str] | None:
        table = self.rng.choice(list(self.tables))
        cols = self.tables[table]
        name = self.names[table]
        choice = self.rng.random()
        if choice < 0.4:
            self.added += 1
            col = Column(f"extra{self.added}", ColumnType.LONG, sql="INT")
            cols.append(col)
            for row in self.state[table].values():
                row.append(None)
            return table, f"ALTER TABLE `{self.cfg.database}`.`{name}` ADD COLUMN `{col.name}` INT"
        extras = [i for i, c in enumerate(cols) if c.name.startswith("extra")]
        if choice < 0.6 and extras:
            i = extras[-1]
            dropped = cols.pop(i)
            for row in self.state[table].values():
                row.pop(i)
            return table, f"ALTER TABLE `{self.cfg.database}`.`{name}` DROP COLUMN `{dropped.name}`"
        if choice < 0.8 and extras:
            c = cols[extras[0]]
            old, c.name = c.name, c.name + "_r"
            return table, f"ALTER TABLE `{self.cfg.database}`.`{name}` RENAME COLUMN `{old}` TO `{c.name}`"
        new = name + "_v2" if not name.endswith("_v2") else name[:-3]
        self.names[table] = new
        return table, f"RENAME TABLE `{self.cfg.database}`.`{name}` TO `{self.cfg.database}`.`{new}`"

    def run(self, out: str | Path, on_progress: Callable[[int], None] | None = None) -> GenResult:
        """Write the series and its truth under ``out``; ``on_progress`` hears the bytes written so
        far after every transaction (for a progress bar)."""
        cfg = self.cfg
        out = Path(out)
        truth_dir = out / "truth"
        truth_dir.mkdir(parents=True, exist_ok=True)
        w = BinlogWriter(
            out, flavor=self.flavor, max_file_size=cfg.max_file_size, created=cfg.start_us // 10**6
        )
        result = GenResult(w.files, truth_dir, tables=self.tables)
        txlog = open(truth_dir / "transactions.jsonl", "w")  # noqa: SIM115 - closed below
        ts = cfg.start_us // 10**6
        events: list[tuple[int, Any, int]] = [
            self._query(f"CREATE DATABASE `{cfg.database}`", ts, cfg.database)
        ]
        for t, cols in self.tables.items():
            events.append(
                self._query(
                    f"CREATE TABLE `{cfg.database}`.`{t}` ({', '.join(f'`{c.name}` {c.sql}' for c in cols)}, PRIMARY KEY (`id`))",
                    ts,
                )
            )
        for ev in events:
            commit = self._tick()
            code, g = self._gtid(commit)
            where = w.transaction(
                [(code, self._standalone(g), commit // 10**6), (ev[0], ev[1], commit // 10**6)]
            )
            self._log(txlog, result, g, commit, "ddl", 0, where)
        n = 0
        while (written := w.pos + (len(w.files) - 1) * (cfg.max_file_size or 0)) < cfg.target_bytes:
            if on_progress is not None:
                on_progress(written)
            n += 1
            commit = self._tick()
            if cfg.ddl_every and n % cfg.ddl_every == 0:
                ddl = self._ddl()
                if ddl:
                    code, g = self._gtid(commit)
                    where = w.transaction(
                        [(code, self._standalone(g), commit // 10**6), self._query(ddl[1], commit // 10**6)]
                    )
                    self._log(txlog, result, g, commit, "ddl", 0, where)
                    continue
            self._transaction(w, txlog, result, commit)
        w.close(self.now_us // 10**6)
        txlog.close()
        self._write_truth(truth_dir)
        return result

    def _standalone(self, g: Any) -> Any:
        if isinstance(g, MariaGtid):
            g.flags = MARIA_FL_STANDALONE
            g.commit_id = None
        return g

    def _tick(self) -> int:
        self.now_us += self.rng.randrange(1, 200_000)
        return self.now_us

    def _transaction(self, w: BinlogWriter, txlog: Any, result: GenResult, commit: int) -> None:
        rng = self.rng
        start_s = (commit - rng.randrange(0, 3_000_000)) // 10**6  # statements started earlier
        changes: dict[str, list[tuple[str, Any, Any]]] = {}
        for _ in range(rng.randint(1, 6)):
            table = rng.choice(list(self.tables))
            op, before, after = self._change(table)
            changes.setdefault(table, []).append((op, before, after))
            if op == "delete":
                self.state[table].pop(before[0])
            else:
                self.state[table][after[0]] = after
        self._undo(changes)
        if rng.random() < self.cfg.rollback_rate:  # rolled back: nothing in the truth, nothing written
            return
        self._as_written(changes)
        code, g = self._gtid(commit)
        events = [(code, g, commit // 10**6), self._query("BEGIN", start_s)]
        rows = 0
        for table, items in changes.items():
            tm = self._writer_table(table)
            events.append((EventType.TABLE_MAP, tm, start_s))
            for op in ("insert", "update", "delete"):
                batch = [(b, a) for o, b, a in items if o == op]
                if not batch:
                    continue
                rows += len(batch)
                events.append((self._rows_code(op), self._rows(tm, op, batch), start_s))
        self.xid += 1
        events.append((EventType.XID, Xid(self.xid), commit // 10**6))
        encoded: list[bytes | None] = [None] + [w.encode(code, body) for code, body, _ in events[1:]]
        if isinstance(g, Gtid) and g.transaction_length is not None:
            g.transaction_length = self._length(w, events, encoded)
        where = w.transaction(events, encoded)
        self._log(txlog, result, g, commit, "commit", rows, where)

    def _undo(self, changes: dict[str, list[tuple[str, Any, Any]]]) -> None:
        """The tables as before a transaction's changes (applied as its statements ran)."""
        for table, items in changes.items():
            for op, before, after in reversed(items):
                if op == "insert":
                    self.state[table].pop(after[0])
                else:
                    self.state[table][before[0]] = before

    def _as_written(self, changes: dict[str, list[tuple[str, Any, Any]]]) -> None:
        """A transaction's changes applied to the truth in the order the binlog holds them: per
        table its inserts, then updates, then deletes (one rows event each). Where the statements
        ran in another order on one key (deleted, then inserted again) the truth is what the events
        do, which a replica and every sink reproduce."""
        for table, items in changes.items():
            state = self.state[table]
            for op in ("insert", "update", "delete"):
                for o, before, after in items:
                    if o != op:
                        continue
                    if op == "delete":
                        state.pop(before[0], None)
                    else:
                        state[after[0]] = after

    def _rows_code(self, op: str) -> int:
        if self.flavor.mariadb:
            return {
                "insert": EventType.WRITE_ROWS_V1,
                "update": EventType.UPDATE_ROWS_V1,
                "delete": EventType.DELETE_ROWS_V1,
            }[op]
        return {
            "insert": EventType.WRITE_ROWS_V2,
            "update": EventType.UPDATE_ROWS_V2,
            "delete": EventType.DELETE_ROWS_V2,
        }[op]

    def _rows(self, tm: TableMap, op: str, batch: list[tuple[Any, Any]]) -> Rows:
        n = len(tm.columns)
        full = (1 << n) - 1
        version = 1 if self.flavor.mariadb else 2
        r = Rows(
            op,
            version,
            tm.table_id,
            1,
            n,
            full if op != "insert" else 0,
            full if op != "delete" else 0,
            table=tm,
        )
        r.rows = [(list(b) if b else None, list(a) if a else None) for b, a in batch]
        return r

    def _length(
        self, w: BinlogWriter, events: list[tuple[int, Any, int]], encoded: list[bytes | None]
    ) -> int:
        """transaction_length: the bytes of the whole transaction, its GTID event included."""
        size = sum(19 + len(data or b"") + 4 for data in encoded[1:])
        g = events[0][1]
        for _ in range(3):  # the GTID event's own size depends on the length it carries
            g.transaction_length = size + 19 + len(encode_body(events[0][0], g, w.fde)) + 4
        return int(g.transaction_length)

    def _log(
        self,
        txlog: Any,
        result: GenResult,
        g: Any,
        commit: int,
        kind: str,
        rows: int,
        where: tuple[Path, int],
    ) -> None:
        gtid = g.gtid if isinstance(g, (Gtid, MariaGtid)) else None
        t = TxnTruth(gtid, commit, kind, rows, str(where[0]), where[1])
        if self.cfg.keep_transactions:
            result.transactions.append(t)
        txlog.write(json.dumps(dataclasses.asdict(t)) + "\n")

    def _write_truth(self, truth_dir: Path) -> None:
        for table, rows in self.state.items():
            cols = self.tables[table]
            defs = [
                ColumnDef(
                    i,
                    c.type_code,
                    c.meta,
                    c.nullable,
                    name=c.name,
                    unsigned=c.unsigned,
                    collation=c.collation,
                    enum_values=c.enum_values,
                    set_values=c.set_values,
                )
                for i, c in enumerate(cols)
            ]
            with open(truth_dir / f"{self.cfg.database}.{self.names[table]}.jsonl", "w") as f:
                for key in sorted(rows):
                    f.write(
                        json.dumps({d.name: json_value(v, d) for d, v in zip(defs, rows[key], strict=True)})
                        + "\n"
                    )


def generate(out: str | Path, **options: Any) -> GenResult:
    return Generator(GenConfig(**options)).run(out)


__all__ = ["GenConfig", "GenResult", "Generator", "generate"]
