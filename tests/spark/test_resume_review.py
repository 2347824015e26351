"""Review of the batch sync's resume (``binlake.spark.resume``) and the ``startPosition`` option:
cases where a record is trusted or distrusted wrongly, or where a read from a position goes wrong."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from binlake.changes import ROW_OPS
from binlake.generate import generate
from binlake.spark import resume
from binlake.spark.changelog import file_changes
from binlake.spark.plan import SyncReport, batch_version
from binlake.spark.source import BinlogReaderSpark, read_range

FLAGS_AT = 4 + 17  # the FORMAT_DESCRIPTION's header flags (after the magic)
IN_USE = 0x1  # LOG_EVENT_BINLOG_IN_USE_F


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("review") / "bin"
    return generate(folder, seed=5, target_bytes=200_000, max_file_size=60_000, ddl_every=25)


def txn_starts(path: Path) -> list[int]:
    return sorted({c.origin.txn_position for c in file_changes(path) if c.op in ROW_OPS})


def set_in_use(path: Path, on: bool) -> None:
    with open(path, "r+b") as f:
        f.seek(FLAGS_AT)
        (flags,) = struct.unpack("<H", f.read(2))
        f.seek(FLAGS_AT)
        f.write(struct.pack("<H", flags | IN_USE if on else flags & ~IN_USE))


def record_at(state: Path, source: str, path: Path, offset: int) -> None:
    """What ``resume.record`` keeps after a batch whose last transaction starts at ``offset`` of ``path``."""
    from binlake.changes import file_number

    report = SyncReport(file=path.name, txn_position=offset)
    report.version = batch_version(file_number(path.name), offset)
    resume.record(resume.FileRecords(state), source, {}, report)


def test_a_file_the_server_closed_since_is_the_same_file(series: Any, tmp_path: Path) -> None:
    """The last sync ended in the server's active file; the server then rotated: it clears the
    in-use flag of the file's FORMAT_DESCRIPTION (MySQL, MariaDB, and binlake's own mirror,
    ``replication.mirror.Mirror._mark_closed``) and goes on in the next file. Same file, same
    bytes up to where the sync read: the next sync should resume, not read the whole series.
    Failed before the fix: the record's ``head`` digests the header flags too, so every rotation between two syncs
    (the common case: a sync nearly always ends in the active file) reads the whole series again.
    Fixed: digest the header without its flags (bytes 0-16), or clear FLAG_BINLOG_IN_USE first."""
    src = tmp_path / "src"
    src.mkdir()
    for f in series.files[:2]:
        shutil.copy(f, src / f.name)
    active = src / series.files[1].name
    set_in_use(active, True)  # being written, as a server's (or the mirror's) active file is
    state = tmp_path / "state"
    record_at(state, str(src), active, txn_starts(active)[-1])
    assert resume.resumed(resume.FileRecords(state), str(src), {}).point is not None  # nothing changed yet: resumes

    set_in_use(active, False)  # rotated: closed ...
    shutil.copy(series.files[2], src / series.files[2].name)  # ... and the next file begun
    read = resume.resumed(resume.FileRecords(state), str(src), {})
    assert read.point is not None, read.note


def test_a_record_past_the_end_of_its_file_is_not_used(series: Any, tmp_path: Path) -> None:
    """The recorded file is there under its name and with its first header, but shorter than the
    recorded offset (put back from a copy taken earlier, or cut at a server's crash recovery). The
    record no longer says where the source is: the next sync should read the whole series (with a
    note), as for a file gone. Failed before the fix: the record is used, and the read's planning raises
    ``option startPosition: offset … is past the end of the file`` inside Spark's data source
    (the whole sync fails, over and over, until someone finds and deletes the record; the CLI:
    ``binlake: error: …: option startPosition: offset 29289 is past the end of the file`` — an
    option the user never gave, exit 2 on every run).
    Fixed: ``_file_changed`` also checks the offset against the file's size (and, better, that the
    offset is still an event start: a digest of the header at it)."""
    src = tmp_path / "src"
    shutil.copytree(series.files[0].parent, src)
    state = tmp_path / "state"
    f = src / series.files[1].name
    last = txn_starts(f)[-1]
    record_at(state, str(src), f, last)
    with open(f, "r+b") as out:
        out.truncate(last - 1)  # the same file as it was before its last transactions were written
    read = resume.resumed(resume.FileRecords(state), str(src), {})
    assert read.point is None and read.note.startswith("read the whole series"), read.options


@pytest.mark.parametrize("offset", [0, 2, -7])
def test_a_damaged_offset_in_a_record_is_a_note_not_a_crash(series: Any, tmp_path: Path, offset: int) -> None:
    """A record whose offset is not one (hand-edited, or damaged): like a record that does not read,
    the whole series with a note. Failed before the fix: it is used, and ``startPosition`` then refuses it with a
    ValueError raised inside Spark's planning (Python: a Spark stack; the CLI: ``binlake: error:
    ValueError: option startPosition: FILE:POS …``, an option the user never gave; every run).
    Fixed: ``_load`` checks ``offset >= 4`` (what ``start_position`` asks)."""
    source = str(series.files[0].parent)
    state = tmp_path / "state"
    record_at(state, source, series.files[1], txn_starts(series.files[1])[0])
    path = state / resume.DIRECTORY / f"{resume.record_name(source, {})}.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "offset": offset}))
    read = resume.resumed(resume.FileRecords(state), source, {})
    assert read.point is None and "startPosition" not in read.options, read.options


def test_a_start_position_inside_a_transaction_is_refused(series: Any) -> None:
    """``startPosition`` must be a transaction's first event (the option's doc). An offset that is
    an event start but inside a transaction (its BEGIN after the GTID, its TABLE_MAP, a ROWS event)
    is read as if a transaction began there: the rows get another ``txn_position`` and order key
    than a read from the start gives them, no GTID, and a ROWS event whose TABLE_MAP lies before
    the offset is dropped without a word. A position that is not an event start at all is refused
    (``NotAnEventStartError``); this should be too. Failed before the fix: no error, changes silently missing.
    Fixed: ``start_position`` checks the offset is a transaction start (a header walk of that one
    file, as ``gtid_cuts`` / ``split_points`` find boundaries)."""
    from binlake.errors import BinlogError
    from binlake.reader import BinlogReader

    f = series.files[1]
    start = txn_starts(f)[1]
    inside = []
    for ev in BinlogReader(f):
        at = ev.header.log_pos - ev.header.event_size
        if at > start:
            inside.append(at)
        if len(inside) == 3:
            break
    options = {"path": str(f.parent)}

    def read(opts: dict[str, str]) -> list[dict]:
        return [
            r
            for p in BinlogReaderSpark(opts).partitions()
            if p.path == str(f)
            for b in read_range({**opts, "source": "s"}, p)
            for r in b.select(["txn_position", "op", "order_key", "gtid"]).to_pylist()
        ]

    whole = [r for r in read(options) if r["txn_position"] == start]
    assert whole and all(r["gtid"] for r in whole)
    for at in inside:  # BEGIN, TABLE_MAP, the first ROWS event of the transaction at ``start``
        try:
            rows = read({**options, "startposition": f"{f.name}:{at}"})
        except BinlogError:
            continue  # refused: what should happen
        partial = [r for r in rows if r["txn_position"] < txn_starts(f)[2]]
        assert partial == whole, (
            f"from {at} (inside the transaction at {start}): {len(partial)} rows of {len(whole)}, txn_position {sorted({r['txn_position'] for r in partial})}"
        )


@pytest.mark.slow
def test_a_table_restored_to_before_the_record_is_read_again(spark: Any, tmp_path: Path) -> None:
    """The module's promise: a table "restored to before the batch makes the next sync read the
    whole series again". Delta's own RESTORE (``DeltaTable.restore``) puts a table back to an older
    version in a new commit, but the app-transaction version ``committed_version`` reads stays the
    newest ever committed (txn actions are not undone): the record is trusted, the next sync reads
    from it, and the changes between the restored version and the record never come back.
    A whole read would bring them back (its batch is newer than the table: merged again under the
    order-key guard). Failed before the fix: the restored table lacks them. Fixed: keep each table's Delta version
    in the record too and distrust it when a commit since is not binlake's (a RESTORE, a DELETE ...),
    e.g. ``DeltaTable.history()`` since that version."""
    from deltalake import DeltaTable

    from binlake.spark.apply import sync
    from tests.spark.test_sync import final_tables

    series = generate(tmp_path / "bin", seed=8, target_bytes=300_000, max_file_size=60_000, ddl_every=100_000)
    src = tmp_path / "src"
    src.mkdir()
    target = tmp_path / "delta"
    files = series.files
    for f in files[:2]:
        shutil.copy(f, src / f.name)
    sync(spark, str(src), target)
    table = target / "shop.customers"
    restore_to = DeltaTable(str(table)).version()
    for f in files[2:4]:
        shutil.copy(f, src / f.name)
    assert sync(spark, str(src), target).resumed.startswith("resumed at")
    DeltaTable(str(table)).restore(restore_to)  # the table as it was after the first sync
    for f in files[4:]:
        shutil.copy(f, src / f.name)
    last = sync(spark, str(src), target)
    got, want = final_tables(series, target)
    assert got["shop.customers"] == want["shop.customers"], last.resumed


@pytest.mark.slow
def test_a_file_that_arrives_after_a_later_one_is_read(spark: Any, tmp_path: Path) -> None:
    """Files copied out of order (a parallel copy of a server's binlog directory, killed or still
    going): binlog.000003 is not there yet when binlog.000004 is. A sync reads the series as it is
    (no error for the gap) and its record ends in binlog.000004. binlog.000003 then arrives, with
    binlog.000005: the next sync resumes in binlog.000004 and never reads binlog.000003, while a
    whole read would apply its changes (under the order-key guard: those no later change
    overwrote). Failed before the fix: the changes only binlog.000003 holds are lost for good. Fixed: a record keeps
    the names of the files up to its own (or the source refuses a gap in the numbering) and is not
    used when a file appeared before it."""
    from binlake.spark.apply import sync
    from tests.spark.test_sync import final_tables

    series = generate(tmp_path / "bin", seed=9, target_bytes=300_000, max_file_size=60_000, ddl_every=100_000)
    files = series.files
    assert len(files) >= 5
    src = tmp_path / "src"
    src.mkdir()
    for f in files[:2] + files[3:4]:  # binlog.000003 still on its way
        shutil.copy(f, src / f.name)
    first = sync(spark, str(src), tmp_path / "delta")
    assert first.file == files[3].name
    for f in files[2:3] + files[4:]:
        shutil.copy(f, src / f.name)
    last = sync(spark, str(src), tmp_path / "delta")
    got, want = final_tables(series, tmp_path / "delta")
    assert got == want, last.resumed


def test_a_real_servers_rotation_keeps_the_record(mariadb: Any, tmp_path: Path) -> None:
    """The same as ``test_a_file_the_server_closed_since_is_the_same_file`` with a real MariaDB:
    a record in the active binlog, then ``FLUSH BINARY LOGS`` (the server clears the file's in-use
    flag). Failed before the fix: the record is not used ("… is another file than the last sync read")."""
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS rv",
        "CREATE TABLE IF NOT EXISTS rv.t (id INT PRIMARY KEY, v INT)",
        "REPLACE INTO rv.t VALUES (1, 1)",
    )
    files = mariadb.binlog_files()
    active = files[-1]
    with open(active, "rb") as f:
        f.seek(FLAGS_AT)
        assert struct.unpack("<H", f.read(2))[0] & IN_USE  # the server is writing it
    starts = txn_starts(active)
    assert starts
    source = str(mariadb.binlog_dir)
    state = tmp_path / "state"
    record_at(state, source, active, starts[-1])
    assert resume.resumed(resume.FileRecords(state), source, {}).point is not None

    mariadb.flush_binlogs()
    with open(active, "rb") as f:
        f.seek(FLAGS_AT)
        assert not struct.unpack("<H", f.read(2))[0] & IN_USE  # closed
    read = resume.resumed(resume.FileRecords(state), source, {})
    assert read.point is not None, read.note


def test_another_series_under_the_same_names_is_not_resumed(series: Any, tmp_path: Path) -> None:
    """The source's files replaced by another series with the same names (``binlake generate`` run
    again with another seed into the directory; servers with the same server_id whose files began
    in the same second): the record must not be used. Its ``head`` is the first 19 bytes of the
    FORMAT_DESCRIPTION only — timestamp, type, server id, size, end, flags — the same for every
    generated series, and for any two servers of one version and server_id within a second.
    Failed before the fix: the record is used; the read then starts at an offset of another file (here an error
    inside Spark: not an event start; where it happens to be one, a silently wrong read).
    Fixed: also digest the event at the recorded offset (the transaction's GTID event, or its first
    event: ids, position, content), read back before resuming."""
    other = generate(tmp_path / "other", seed=6, target_bytes=200_000, max_file_size=60_000, ddl_every=25)
    src = tmp_path / "src"
    src.mkdir()
    for f in series.files:
        shutil.copy(f, src / f.name)
    state = tmp_path / "state"
    mine = src / series.files[1].name
    record_at(state, str(src), mine, txn_starts(mine)[-1])
    for f in src.iterdir():
        f.unlink()
    for f in other.files:
        shutil.copy(f, src / f.name)  # another series, the same names
    assert (src / mine.name).exists()
    read = resume.resumed(resume.FileRecords(state), str(src), {})
    assert read.point is None, read.note
