"""ADD COLUMN into Delta: the rows a table held before the column was added get its value, rows
changed after keep their own — in one batch, in two, and in a rerun that re-reads what a run before
applied; a column dropped and added again gives the rows the new value. Checked against ``SELECT *``
of a real MariaDB. Rows changed in the batch carry the value in the batch's own MERGE (no rewrite of
the table per added column)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import select_all

DB = "fills_db"

FIRST = [
    f"CREATE DATABASE {DB}",
    f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v INT)",
    f"CREATE TABLE {DB}.held (id INT PRIMARY KEY, v INT)",  # no row changes in the second file
    f"INSERT INTO {DB}.t VALUES (1, 10), (2, 20), (3, 30), (4, 40)",
    f"INSERT INTO {DB}.held VALUES (1, 1), (2, 2)",
]
SECOND = [
    f"UPDATE {DB}.t SET v = 11 WHERE id = 1",  # changed before every added column
    f"ALTER TABLE {DB}.t ADD COLUMN a INT NOT NULL DEFAULT 5",
    f"UPDATE {DB}.t SET a = 6 WHERE id = 2",  # its own value of a, b's fill
    f"INSERT INTO {DB}.t VALUES (5, 50, 7)",
]
THIRD = [
    f"ALTER TABLE {DB}.t ADD COLUMN b VARCHAR(5) NOT NULL DEFAULT 'x'",
    f"INSERT INTO {DB}.t VALUES (6, 60, 8, 'y')",
    f"ALTER TABLE {DB}.t ADD COLUMN c INT DEFAULT 1",
    f"UPDATE {DB}.t SET c = 2 WHERE id = 3",  # dropped below: the re-added column's 9 wins
    f"ALTER TABLE {DB}.t DROP COLUMN c",
    f"ALTER TABLE {DB}.t ADD COLUMN c INT DEFAULT 9",
    f"UPDATE {DB}.t SET c = 3 WHERE id = 4",  # after the re-add: its own
    f"DELETE FROM {DB}.t WHERE id = 6",
    f"ALTER TABLE {DB}.held ADD COLUMN w DECIMAL(6,2) NOT NULL DEFAULT 2.50",
    # several fills of one type and of types typed apart (dates, enums, bits): each its own value
    f"ALTER TABLE {DB}.held ADD COLUMN d DATE NOT NULL DEFAULT '2024-02-29', ADD COLUMN n2 INT DEFAULT 7",
    f"ALTER TABLE {DB}.held ADD COLUMN e ENUM('x', 'y') DEFAULT 'y', ADD COLUMN n3 INT DEFAULT 8",
    f"ALTER TABLE {DB}.held ADD COLUMN ts DATETIME(3) DEFAULT '2020-01-01 10:00:00.123'",
    f"ALTER TABLE {DB}.held ADD COLUMN bits BIT(5) DEFAULT b'10101'",
    # an added column renamed, then its old name added again: two columns, each its own value
    f"ALTER TABLE {DB}.t ADD COLUMN r INT DEFAULT 1",
    f"ALTER TABLE {DB}.t RENAME COLUMN r TO r2",
    f"ALTER TABLE {DB}.t ADD COLUMN r INT DEFAULT 2",
    # a column added earlier widened, a value only the wider type holds
    f"ALTER TABLE {DB}.t MODIFY a BIGINT NOT NULL DEFAULT 5",
    f"UPDATE {DB}.t SET a = 1099511627776 WHERE id = 1",
]
FOURTH = [  # a run after the widening re-reads the add of `a` (INT): the column must stay BIGINT
    f"INSERT INTO {DB}.held (id, v) VALUES (3, 3)",
]


@pytest.fixture(scope="module")
def files(mariadb: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    mariadb.flush_binlogs()
    mariadb.execute(*FIRST)
    mariadb.execute("FLUSH BINARY LOGS")
    mariadb.execute(*SECOND)
    mariadb.execute("FLUSH BINARY LOGS")
    mariadb.execute(*THIRD)
    mariadb.execute("FLUSH BINARY LOGS")
    mariadb.execute(*FOURTH)
    got = mariadb.flush_binlogs()[-5:-1]
    out = tmp_path_factory.mktemp("fills")
    copies = []
    for f in got:
        shutil.copy(f, out / f.name)
        copies.append(out / f.name)
    truth = {t: select_all(mariadb, DB, t) for t in ("t", "held")}
    return {"files": copies, "truth": truth}


def synced(lake: Path, table: str, width: int) -> list[tuple[Any, ...]]:
    from binlake.spark.sinks.delta import read_table

    rows = read_table(lake, DB, table).to_pylist()
    return sorted(tuple(r.values())[:width] for r in rows)


def check(lake: Path, truth: dict[str, list[tuple[Any, ...]]]) -> None:
    for table, want in truth.items():
        # BIT: the server sends its bytes, the target holds the number (binlake's value semantics)
        want = [tuple(int.from_bytes(v, "big") if isinstance(v, bytes) else v for v in r) for r in want]
        assert synced(lake, table, len(want[0])) == want, table


def run(spark: Any, directory: Path, lake: Path) -> Any:
    from binlake.spark.apply import apply_changes, change_log

    return apply_changes(change_log(spark, str(directory), {"databases": DB}), lake, source=str(directory))


def test_one_batch(spark: Any, files: dict[str, Any], tmp_path: Path) -> None:
    src = tmp_path / "bin"
    src.mkdir()
    for f in files["files"]:
        shutil.copy(f, src / f.name)
    report = run(spark, src, tmp_path / "lake")
    check(tmp_path / "lake", files["truth"])
    # one fill per column (c's first value is covered by its second), the held table's too
    held = [f"{DB}.held: {c}" for c in ("w", "d", "n2", "e", "n3", "ts", "bits")]
    t = [f"{DB}.t: {c}" for c in ("a", "b", "c", "r2", "r")]
    assert sorted(report.filled) == sorted([*t, *held])


def test_reruns_over_a_growing_directory(spark: Any, files: dict[str, Any], tmp_path: Path) -> None:
    """The directory grows by a file, each run re-reads all of it as one batch: rows an earlier
    run wrote are re-read (not newer: kept as they are) and must still get the values of the
    columns added after them, each by its own column's place in the order — row 5, written after
    ``a`` was added and before ``b``, keeps its ``a`` and gets ``b``'s."""
    src, lake = tmp_path / "bin", tmp_path / "lake"
    src.mkdir()
    for f in files["files"]:
        shutil.copy(f, src / f.name)
        run(spark, src, lake)
    check(lake, files["truth"])
    again = run(spark, src, lake)  # the same batch once more: nothing to do
    assert again.skipped and not again.tables
    check(lake, files["truth"])
