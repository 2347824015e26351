"""Review of 95064c1 (rolling windows in ``compact.last_per_key``): what a window keeps, carried
into the next and compacted again with it, keeps every rule ``check`` asserts — over windows of
1..5 rows, tiny byte bounds, batches of one row and more, on series with renames, drops, keys moved
and moved back, several servers, a table that turns to partial images late, keyless tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from binlake.arrowlog.changelog import ColumnsOnce, Trim, transaction_batches
from binlake.arrowlog.compact import compacted_schema, last_per_key
from binlake.spark.changelog import file_transactions
from tests.arrowlog.test_compact import assert_kept
from tests.support.written import written


def check_batches(
    batches: list[pa.RecordBatch], schema: pa.Schema, window: int, once: bool, window_bytes: int
) -> list[dict[str, Any]]:
    """``test_compact.check``'s assertions over given batches (any slicing)."""
    every = pa.Table.from_batches(batches, schema).to_pylist()
    kept = pa.Table.from_batches(
        last_per_key(batches, schema, window, window_bytes), compacted_schema(schema)
    ).to_pylist()
    assert_kept(every, kept, once)
    return kept


def check_every_way(path: Path) -> None:
    for once in (True, False):
        trim = Trim(ColumnsOnce() if once else None, keyed_before=False)
        whole = pa.Table.from_batches(
            list(transaction_batches(file_transactions(path), trim=trim)), trim.schema
        )
        for size in (1, 2, 3):
            batches = whole.to_batches(max_chunksize=size)
            for window in (1, 2, 3, 4, 5, 8, 12, 20, 40):
                for window_bytes in (1, 2_000, 1 << 27):
                    check_batches(batches, trim.schema, window, once, window_bytes)


STATEMENTS = [
    "INSERT INTO r.t VALUES (1, 1), (2, 2), (3, 3)",
    "UPDATE r.t SET v = 10 WHERE id = 1",
    "SET SESSION server_id = 77",
    "UPDATE r.t SET id = 5 WHERE id = 1",  # moved 1 -> 5
    "UPDATE r.t SET v = 11 WHERE id = 2",
    "SET SESSION server_id = 1",
    "UPDATE r.t SET id = 1 WHERE id = 5",  # and back
    "UPDATE r.t SET id = 5 WHERE id = 1",  # and on again
    "INSERT INTO r.t VALUES (1, 100)",  # the old key again
    "INSERT INTO r.k VALUES (1), (1)",
    "RENAME TABLE r.t TO r.u",
    "INSERT INTO r.k VALUES (2)",
    "UPDATE r.u SET v = 12 WHERE id = 2",  # replaces t's row 2
    "CREATE TABLE r.t (id INT PRIMARY KEY, v INT)",
    "INSERT INTO r.t VALUES (2, 200)",  # another table
    "UPDATE r.u SET id = 9 WHERE id = 3",
    "DROP TABLE r.t",
    "CREATE TABLE r.t (id INT PRIMARY KEY, v INT)",
    "INSERT INTO r.t VALUES (2, 201), (9, 9)",
    "RENAME TABLE r.u TO r.tmp, r.t TO r.u, r.tmp TO r.t",
    "UPDATE r.t SET v = 13 WHERE id = 2",  # u's (the first t's) row 2
    "UPDATE r.u SET v = 14 WHERE id = 2",
    "SET SESSION server_id = 88",
    "UPDATE r.u SET v = 15 WHERE id = 9",
    "SET SESSION server_id = 1",
    "UPDATE r.u SET v = 16 WHERE id = 9",
    "UPDATE r.t SET v = 17 WHERE id = 9",
    "SET SESSION binlog_row_image = 'MINIMAL'",
    "UPDATE r.t SET v = 18 WHERE id = 9",  # t partial from here: all its changes kept
    "SET SESSION binlog_row_image = 'FULL'",
    "UPDATE r.t SET id = 3 WHERE id = 9",
    "UPDATE r.t SET v = 19 WHERE id = 3",
    "UPDATE r.u SET id = 12 WHERE id = 2",
    "UPDATE r.u SET id = 2 WHERE id = 12",
]


def test_rolling_windows_on_a_real_server(own_mariadb: Any, tmp_path: Path) -> None:
    (copy,) = written(
        own_mariadb,
        ["CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY, v INT)", "CREATE TABLE r.k (v INT)"],
        STATEMENTS,
        tmp_path / "bin",
    ).iterdir()
    check_every_way(copy)


def test_carried_drops_are_not_walked_again_by_every_window(
    own_mariadb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A range that starts with many dropped tables (an ETL's staging tables created, filled and
    dropped) then updates a few hot keys: every ``drop_table`` row is kept and carried, and each
    later window's ``_identities`` looked up every carried name at every carried drop (their
    product per window: 1,000 drops, 300k updates, windows of 16,384 took 13 s of 13.3 there;
    4,000 drops, 1.2M rows, default windows: 50 s against 3.5 s not rolling). Now each stretch
    between drops looks up the names of its own rows: counted, at most one per row compacted."""
    from binlake.arrowlog import compact

    statements = []
    for i in range(600):
        statements += [
            f"CREATE TABLE x.s{i} (id INT PRIMARY KEY)",
            f"INSERT INTO x.s{i} VALUES (1)",
            f"DROP TABLE x.s{i}",
        ]
    statements.append(
        "INSERT INTO x.h (id, v) SELECT seq % 10, seq FROM x.seq_1_to_60000 "
        "ON DUPLICATE KEY UPDATE v = VALUES(v)"
    )
    (copy,) = written(
        own_mariadb,
        ["CREATE DATABASE x", "CREATE TABLE x.h (id INT PRIMARY KEY, v INT)"],
        statements,
        tmp_path / "bin",
    ).iterdir()
    trim = Trim(ColumnsOnce(), keyed_before=False)
    batches = list(transaction_batches(file_transactions(copy), trim=trim))
    lookups, compacted_rows = [0], [0]
    of, compacted = compact._Tables.of, compact.compacted

    def counted_of(self: Any, name: str) -> int:
        lookups[0] += 1
        return of(self, name)

    def counted_compacted(t: pa.Table, *args: Any) -> pa.Table:
        carry = args[2] if len(args) > 2 else None
        compacted_rows[0] += t.num_rows + (carry.num_rows if carry is not None else 0)
        return compacted(t, *args)

    monkeypatch.setattr(compact._Tables, "of", counted_of)
    monkeypatch.setattr(compact, "compacted", counted_compacted)
    rolled = list(last_per_key(batches, trim.schema, 4_096))
    every = sum(b.num_rows for b in batches)
    assert every > 60_000 and sum(b.num_rows for b in rolled) < 2_000  # the windows rolled
    assert compacted_rows[0] > 10 * 1_800  # the drops (and their tables' rows) carried through
    assert 0 < lookups[0] <= compacted_rows[0]


def test_rolling_windows_over_partial_json_and_noblob_on_mysql(mysql: Any, tmp_path: Path) -> None:
    """Partial JSON updates carried (``json_edits`` found again over the carry), a NOBLOB key move
    carried, a table logged whole first and MINIMAL only in a later window, on MySQL."""
    doc = '{"a": 1, "b": "' + "x" * 50 + '"}'
    (copy,) = written(
        mysql,
        [
            "DROP DATABASE IF EXISTS rj",
            "CREATE DATABASE rj",
            "CREATE TABLE rj.t (id INT PRIMARY KEY, doc JSON, v INT)",
            "CREATE TABLE rj.w (id INT PRIMARY KEY, v INT)",
        ],
        [
            f"INSERT INTO rj.t VALUES (1, '{doc}', 0), (2, '{doc}', 0), (3, '{doc}', 0)",
            "INSERT INTO rj.w VALUES (1, 1), (2, 2)",
            "UPDATE rj.w SET v = v + 1",
            "UPDATE rj.w SET id = 7 WHERE id = 1",
            "UPDATE rj.w SET v = v + 1",
            "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
            "SET SESSION binlog_row_image = 'NOBLOB'",
            "UPDATE rj.t SET doc = JSON_SET(doc, '$.a', 2) WHERE id = 1",
            "UPDATE rj.t SET id = 11, doc = JSON_SET(doc, '$.a', 3) WHERE id = 1",
            "UPDATE rj.t SET v = 4 WHERE id = 11",
            "UPDATE rj.t SET id = 1 WHERE id = 11",
            "SET SESSION binlog_row_image = 'MINIMAL'",
            "UPDATE rj.t SET doc = JSON_REMOVE(doc, '$.b') WHERE id = 2",
            "UPDATE rj.t SET v = 9 WHERE id = 2",
            "UPDATE rj.w SET v = 50 WHERE id = 7",  # w partial only now
            "SET SESSION binlog_row_image = 'FULL'",
            "UPDATE rj.w SET id = 1 WHERE id = 7",
            "UPDATE rj.t SET v = 10",
            "RENAME TABLE rj.t TO rj.t2",
            "UPDATE rj.t2 SET doc = JSON_SET(doc, '$.a', 5) WHERE id = 3",
        ],
        tmp_path / "bin",
    ).iterdir()
    check_every_way(copy)
