"""A batch sync resumes where the last one ended (``binlake.spark.resume``), and the ``binlog``
source reads from a transaction on (option ``startPosition``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from binlake.changes import ROW_OPS, file_number
from binlake.errors import BinlogError
from binlake.generate import generate
from binlake.spark import resume
from binlake.spark.apply import sync
from binlake.spark.changelog import file_changes
from binlake.spark.plan import SyncReport, batch_version
from binlake.spark.source import BinlogReaderSpark, read_range
from binlake.spark.stream import BinlogStreamReader
from tests.spark.test_sync import final_tables


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Seven files with DDL (renames, added columns) along the way."""
    folder = tmp_path_factory.mktemp("resume") / "bin"
    return generate(folder, seed=5, target_bytes=420_000, max_file_size=60_000, ddl_every=25)


def transaction_starts(files: list[Path]) -> list[tuple[int, str, int]]:
    """(file number, file name, offset) of every transaction with a row change, in order (the pure
    reader's change log)."""
    found = {
        (c.origin.file_number, c.file, c.origin.txn_position)
        for f in files
        for c in file_changes(f)
        if c.op in ROW_OPS
    }
    return sorted(found)


def test_start_position_reads_from_that_transaction_on(series: Any) -> None:
    files = series.files
    starts = transaction_starts(files)
    number, name, offset = next(s for s in starts if s[1] == files[2].name and s[2] > 4_000)
    options = {"path": str(files[0].parent), "startposition": f"{name}:{offset}"}
    parts = BinlogReaderSpark(options).partitions()
    assert parts[0].path == str(files[2]) and parts[0].start == offset
    assert {p.path for p in parts} == {str(f) for f in files[2:]}
    read = [
        (file_number(r["file"]), r["file"], r["txn_position"])
        for p in parts
        for b in read_range({**options, "source": "s"}, p)
        for r in b.select(["file", "txn_position", "op"]).to_pylist()
        if r["op"] in ("insert", "update", "delete")
    ]
    assert sorted(set(read)) == [s for s in starts if s >= (number, name, offset)]
    # a stream's first micro-batch starts there too
    assert BinlogStreamReader(options).initialOffset() == {"file": name, "pos": offset}


@pytest.mark.parametrize(
    ("value", "error", "says"),
    [
        ("binlog.000002", ValueError, "FILE:POS"),
        ("binlog.000002:3", ValueError, "FILE:POS"),
        ("binlog.000099:400", BinlogError, "is not in the series"),
        ("binlog.000002:99999999", BinlogError, "past the end of the file"),
    ],
)
def test_a_start_position_that_is_not_one_is_refused(series: Any, value: str, error: type, says: str) -> None:
    with pytest.raises(error, match=says):
        BinlogReaderSpark({"path": str(series.files[0].parent), "startposition": value}).partitions()


@pytest.mark.slow
def test_reruns_resume_and_a_changed_target_reads_everything(spark: Any, series: Any, tmp_path: Path) -> None:
    """Synced in two runs as files arrive, then once more with nothing new: each run after the first
    reads from where the last ended, and the tables equal the generator's truth. A table removed
    from the target makes the next run read the whole series and bring it back; a sync with another
    selection keeps a record of its own."""
    src = tmp_path / "src"
    src.mkdir()
    for f in series.files[:3]:
        shutil.copy(f, src / f.name)
    target = tmp_path / "delta"
    first = sync(spark, str(src), target)
    assert not first.resumed and first.file == series.files[2].name
    for f in series.files[3:]:
        shutil.copy(f, src / f.name)
    second = sync(spark, str(src), target)
    assert second.resumed.startswith(f"resumed at {first.position},")
    changes = [c for f in series.files for c in file_changes(f) if c.op in ROW_OPS]
    full = len(changes)
    again = sum(1 for c in changes if (c.file, c.origin.txn_position) == (first.file, first.txn_position))
    assert first.changes + second.changes == full + again > full  # the first's last transaction again
    got, want = final_tables(series, target)
    assert got == want

    third = sync(spark, str(src), target)
    assert third.resumed.startswith(f"resumed at {second.position},") and not third.tables

    removed = sorted(p for p in target.iterdir() if (p / "_delta_log").is_dir())[0]
    shutil.rmtree(removed)
    fourth = sync(spark, str(src), target)
    assert fourth.resumed == f"read the whole series: table {removed.name} is not in the target any more"
    assert fourth.changes == full
    got, want = final_tables(series, target)
    assert got == want

    selected = sync(spark, str(src), target, options={"operations": "insert,update,delete"})
    assert not selected.resumed  # another read: no record of it yet
    assert len(list((target / resume.DIRECTORY).glob("*.json"))) == 2
    assert resume.FileRecords(target).forget(str(src)) == 2
    assert not list((target / resume.DIRECTORY).glob("*.json"))
    assert resume.resumed(resume.FileRecords(target), str(src), {}).point is None


def write_record(state: Path, source: str, **changes: Any) -> Path:
    """The record ``resume.record`` writes after a batch ending in the second file's second
    transaction, with ``changes``."""
    files = resume._files(source)
    name = os.path.basename(files[1])
    offset = sorted({c.origin.txn_position for c in file_changes(files[1]) if c.op in ROW_OPS})[1]
    report = SyncReport(file=name, txn_position=offset, version=batch_version(file_number(name), offset))
    resume.record(resume.FileRecords(state), source, {}, report)
    path = state / resume.DIRECTORY / f"{resume.record_name(source, {})}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return path


def test_a_record_is_used_only_while_target_and_source_hold_what_it_says(series: Any, tmp_path: Path) -> None:
    """No Spark: the records' checks. A record whose file is another of the same name, a table gone
    back before its version or changed by another writer, a damaged record: each reads the whole
    series and says why."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    source = str(series.files[0].parent)
    state = tmp_path / "state"
    records = resume.FileRecords(state)
    write_record(state, source)
    used = resume.resumed(records, source, {"splitSize": "1MB"})  # how a read is cut does not count
    assert used.point is not None and used.options["startPosition"] == used.point.shown
    assert used.point.file == "binlog.000002" and used.note.startswith(f"resumed at {used.point.shown}")

    write_record(state, source, identity="0" * 64)
    assert "binlog.000002 is another file than the last sync read" in resume.resumed(records, source, {}).note

    write_record(state, source, file="binlog.000077")
    assert "binlog.000077:" in resume.resumed(records, source, {}).note

    write_record(state, source, before=["binlog.000001", "binlog.000000"])  # one since gone: fine
    assert resume.resumed(records, source, {}).point is not None
    write_record(state, source, before=[])
    assert "binlog.000001, before binlog.000002 in the series, arrived" in resume.resumed(records, source, {}).note

    props = CommitProperties(app_transactions=[Transaction("binlake-sync", 10000000000100)])
    write_deltalake(str(state / "shop.t"), pa.table({"a": [1]}), commit_properties=props)
    write_record(state, source)  # the table as it is now: used
    assert resume.resumed(records, source, {}).point is not None
    write_record(state, source, holds={"shop.t": [20000000000100, 0]})
    assert "table shop.t is back before" in resume.resumed(records, source, {}).note
    write_record(state, source)
    DeltaTable(str(state / "shop.t")).delete("a = 1")  # someone else's write since
    assert "table shop.t was changed by another writer" in resume.resumed(records, source, {}).note

    write_record(state, source).write_text("{not json")
    assert "does not read" in resume.resumed(records, source, {}).note
    assert resume.resumed(records, source, {}).options == {}  # nothing added: the whole series

    assert resume.resumed(None, source, {}).point is None  # a sink without records
    assert resume.resumed(records, source, {"nodes": "true"}).point is None


@pytest.mark.slow
def test_the_command_says_it_resumed_and_that_nothing_is_new(series: Any, tmp_path: Path) -> None:
    target = tmp_path / "lake"
    cmd = [
        sys.executable,
        "-m",
        "binlake.cli",
        "sync",
        str(series.files[0].parent),
        "--to",
        f"delta:{target}",
    ]
    env = {**os.environ, "HOME": str(tmp_path)}
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert first.returncode == 0, first.stderr
    said = " ".join(first.stdout.split())
    assert "resumed at" not in said and "last transaction applied starts at" in said, first.stdout
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert again.returncode == 0, again.stderr
    out = " ".join(again.stdout.split())
    assert "resumed at binlog.000007:" in out and "(nothing new)" in out, again.stdout


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
def test_a_database_target_resumes_too(spark: Any, tmp_path: Path, kind: str, request: Any) -> None:
    """Into PostgreSQL and MariaDB: the records live in table ``_binlake_resume``, checked by the
    source's batch position and the synced tables; a rerun resumes, a table dropped in the target
    makes the next batch read everything, the tables equal the truth; ``offsets reset`` forgets the
    records with the position, and the next sync reads everything again."""
    from binlake.spark.offsets import reset_jdbc
    from binlake.spark.sinks.jdbc import JdbcSink
    from binlake.spark.sinks.jdbc_dialects import dialect_for
    from tests.spark.test_jdbc import expected_tables, jdbc_tables

    server = request.getfixturevalue("postgres" if kind == "postgres" else "sink_mariadb")
    request.addfinalizer(lambda: empty_target(spark, server.url))  # the server is the session's
    empty_target(spark, server.url)
    driver, quote = ("org.postgresql.Driver", '"') if kind == "postgres" else ("org.mariadb.jdbc.Driver", "`")
    read_url = server.url.replace("jdbc:mariadb:", "jdbc:mysql:")  # Spark's MySQL dialect reads it
    workload = generate(tmp_path / "all", seed=8, target_bytes=300_000, max_file_size=60_000, ddl_every=0)
    assert len(workload.files) >= 5
    src = tmp_path / "src"
    src.mkdir()

    def arrive(files: list[Path]) -> None:
        for f in files:
            shutil.copy(f, src / f.name)

    arrive(workload.files[:2])
    first = sync(spark, str(src), server.url)
    assert not first.resumed and first.tables
    arrive(workload.files[2:4])
    second = sync(spark, str(src), server.url)
    assert second.resumed.startswith(f"resumed at {first.position},") and second.tables

    # a table dropped in the target: the next batch reads the whole series and brings it back
    schema, table = dialect_for(server.url).target("shop", "customers")
    db = JdbcSink(server.url).connect(spark)
    try:
        db.execute(f"DROP TABLE {db.dialect.q(schema)}.{db.dialect.q(table)}")
    finally:
        db.close()
    arrive(workload.files[4:])
    third = sync(spark, str(src), server.url)
    assert third.resumed == f"read the whole series: table {schema}.{table} is not in the target any more"
    expected = expected_tables(spark, workload)
    assert jdbc_tables(spark, read_url, sorted(expected), driver, quote) == expected

    again = sync(spark, str(src), server.url)
    assert again.resumed.startswith(f"resumed at {third.position},")
    assert again.skipped == ["(batch already applied)"] and not again.tables

    db = JdbcSink(server.url).connect(spark)
    try:
        assert [o.source for o in reset_jdbc(db, str(src))] == [str(src)]
    finally:
        db.close()
    replay = sync(spark, str(src), server.url)
    full = sum(1 for f in workload.files for c in file_changes(f) if c.op in ROW_OPS)
    assert not replay.resumed and replay.changes == full
    assert jdbc_tables(spark, read_url, sorted(expected), driver, quote) == expected


def empty_target(spark: Any, url: str) -> None:
    """Drop every synced table of a database target and forget its positions and records."""
    from binlake.spark.sinks.jdbc import JdbcSink
    from binlake.spark.sinks.jdbc_connection import tables_with
    from binlake.spark.sinks.jdbc_dialects import POSITIONS
    from binlake.spark.sinks.jdbc_records import RECORDS
    from binlake.spark.typedrows import ORDER

    db = JdbcSink(url).connect(spark)
    try:
        for schema, table in tables_with(db, ORDER):
            db.execute(f"DROP TABLE {db.dialect.q(schema)}.{db.dialect.q(table)}")
        for own in (POSITIONS, RECORDS):
            db.execute(f"DROP TABLE IF EXISTS {own}")
    finally:
        db.close()
