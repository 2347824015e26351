"""Real replicas against ``binlake serve``: mariadb-binlog --read-from-remote-server prints what it
prints for the files, binlake's replica client gets the files' transactions (and ``binlake mirror``
their bytes), python-mysql-replication decodes the same rows; a global binlog of the simulator and
real corpus series. No client is mocked."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pymysql
import pytest

from binlake.events.rows import Rows
from binlake.events.types import FLAG_BINLOG_IN_USE
from binlake.globalbinlog.output import GLOBAL_UUID
from binlake.gtid import GtidSet
from binlake.replication.client import FilePosition, GtidStart, ReplicaClient, ServerAddress
from binlake.series import BinlogSeries
from binlake.txn import UNFINISHED, iter_transactions
from binlake.wire import crc32

from .conftest import PASSWORD, USER, corpus_series, needs_mariadb_binlog, serving

_FAKE_ROTATE = re.compile(r"end_log_pos 0 .*Rotate to ")


def remote_text(port: int, file: str, *extra: str, password: str = PASSWORD) -> str:
    run = subprocess.run(
        ["mariadb-binlog", "--read-from-remote-server", "--host", "127.0.0.1", "--port", str(port),
         "--user", USER, f"--password={password}", "-vv", *extra, file],
        capture_output=True, text=True, errors="surrogateescape", timeout=60, check=True,
    )  # fmt: skip
    return run.stdout


def without_fake_rotates(text: str) -> list[str]:
    """The dump's fake ROTATE is printed by mariadb-binlog (with its ``# at`` line before): not in the file."""
    lines = text.splitlines()
    out: list[str] = []
    for line in lines:
        if _FAKE_ROTATE.search(line):
            if out and out[-1].startswith("# at "):
                out.pop()
            continue
        out.append(line)
    return out


def local_text(path: Path, tmp: Path | None = None) -> str:
    """mariadb-binlog on the file as a server sends it: its format event's in-use flag cleared (a
    server clears it in a dump; MySQL computes the CRC32 with it cleared, so the CRC stays)."""
    data = path.read_bytes()
    if tmp is not None and data[4 + 17] & FLAG_BINLOG_IN_USE:
        size = int.from_bytes(data[4 + 9 : 4 + 13], "little")
        fde = bytearray(data[4 : 4 + size])
        fde[17] &= ~FLAG_BINLOG_IN_USE
        if crc32(bytes(data[4 : 4 + size - 4])) == int.from_bytes(fde[-4:], "little"):
            fde[-4:] = crc32(bytes(fde[:-4])).to_bytes(4, "little")  # a writer that checksummed it set
        path = tmp / path.name
        path.write_bytes(data[:4] + bytes(fde) + data[4 + size :])
    return subprocess.run(
        ["mariadb-binlog", "-vv", str(path)],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        check=True,
    ).stdout


def file_transactions(directory: Path) -> list[tuple[object, ...]]:
    series = BinlogSeries.open(directory)
    return [_key(t) for t in iter_transactions(series.events()) if t.kind != UNFINISHED]


def _key(t) -> tuple[object, ...]:  # type: ignore[no-untyped-def]
    return (t.kind, t.gtid, t.xid, t.rows, tuple(t.tables), Path(t.source).name, t.start, t.end)


def served_transactions(port: int, start: object) -> list[tuple[object, ...]]:
    client = ReplicaClient(
        ServerAddress("127.0.0.1", port, USER, PASSWORD, ssl_disabled=True),
        start,
        blocking=False,
        reconnect=False,  # type: ignore[arg-type]
    )
    return [_key(t) for t in client.transactions()]


# -- the global binlog ---------------------------------------------------------------------------


@needs_mariadb_binlog
def test_mariadb_binlog_remote_prints_what_it_prints_for_each_file(
    global_binlog: Path, tmp_path: Path
) -> None:
    with serving(global_binlog) as port:
        for f in sorted(global_binlog.glob("binlog.0*")):
            remote = remote_text(port, f.name)
            assert without_fake_rotates(remote) == local_text(f, tmp_path).splitlines(), f.name
            assert remote.count("### UPDATE `db`.`acct`") > 10


@needs_mariadb_binlog
def test_mariadb_binlog_to_last_log_gets_every_row_of_the_series(global_binlog: Path) -> None:
    files = sorted(global_binlog.glob("binlog.0*"))
    with serving(global_binlog) as port:
        remote = remote_text(port, files[0].name, "--to-last-log")
    local = subprocess.run(
        ["mariadb-binlog", "-vv", *map(str, files)], capture_output=True, text=True, check=True
    )
    rows = [line for line in remote.splitlines() if line.startswith("###")]
    assert rows == [line for line in local.stdout.splitlines() if line.startswith("###")]
    assert len(rows) > 1000
    # each new file is announced by a fake ROTATE, as a server does
    assert [m for m in re.findall(r"Rotate to (\S+)", remote)] == [
        "binlog.000001", "binlog.000002", "binlog.000002", "binlog.000003", "binlog.000003"
    ]  # fmt: skip


def test_binlake_replica_gets_the_files_transactions(global_binlog: Path) -> None:
    expected = file_transactions(global_binlog)
    with serving(global_binlog) as port:
        assert served_transactions(port, FilePosition("binlog.000001")) == expected
        # from inside a file: a transaction boundary of the second file
        second = [t for t in expected if t[5] == "binlog.000002"]
        start = second[3][6]
        assert (
            served_transactions(port, FilePosition("binlog.000002", start))
            == expected[expected.index(second[3]) :]
        )
        # an empty GTID set: the whole series
        assert served_transactions(port, GtidStart("")) == expected


def test_resume_by_gtid_gets_exactly_the_remainder(global_binlog: Path) -> None:
    """Issue #17: the global binlog numbers its transactions UUID:1, 2, 3, ...; a replica that has
    the first k (any k: inside a file, at a file's end, none left) gets exactly the rest, from
    binlake's replica client and from python-mysql-replication (COM_BINLOG_DUMP_GTID both)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import GtidEvent

    expected = file_transactions(global_binlog)
    gtids = [t[1] for t in expected]
    assert gtids == [f"{GLOBAL_UUID}:{i}" for i in range(1, len(expected) + 1)]
    first_file_end = sum(1 for t in expected if t[5] == "binlog.000001")
    with serving(global_binlog) as port:
        for k in (1, first_file_end, first_file_end + 1, len(expected) - 7, len(expected)):
            assert served_transactions(port, GtidStart(f"{GLOBAL_UUID}:1-{k}")) == expected[k:], k
        stream = BinLogStreamReader(
            connection_settings={"host": "127.0.0.1", "port": port, "user": USER, "passwd": PASSWORD},
            server_id=4243, blocking=False, auto_position=f"{GLOBAL_UUID}:1-{first_file_end + 3}",
            only_events=[GtidEvent],
        )  # fmt: skip
        try:
            got = [ev.gtid for ev in stream]
        finally:
            stream.close()
    assert got == gtids[first_file_end + 3 :]


def test_python_mysql_replication_decodes_the_same_rows(global_binlog: Path) -> None:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import UpdateRowsEvent

    expected = [
        (ev.body.table.table, [tuple(b) for b, _ in ev.body.rows], [tuple(a) for _, a in ev.body.rows])
        for _, ev in BinlogSeries.open(global_binlog).events()
        if isinstance(ev.body, Rows)
    ]
    with serving(global_binlog) as port:
        stream = BinLogStreamReader(
            connection_settings={"host": "127.0.0.1", "port": port, "user": USER, "passwd": PASSWORD},
            server_id=4242, blocking=False, log_file="binlog.000001", log_pos=4, resume_stream=True,
            only_events=[UpdateRowsEvent],
        )  # fmt: skip
        got = []
        try:
            for ev in stream:
                got.append(
                    (
                        ev.table,
                        [tuple(r["before_values"].values()) for r in ev.rows],
                        [tuple(r["after_values"].values()) for r in ev.rows],
                    )
                )
        finally:
            stream.close()
    assert got == expected and len(got) > 300


def test_binlake_mirror_of_the_served_directory_is_byte_identical(
    global_binlog: Path, tmp_path: Path
) -> None:
    from binlake.replication.mirror import Mirror

    with serving(global_binlog) as port:
        client = ReplicaClient(
            ServerAddress("127.0.0.1", port, USER, PASSWORD, ssl_disabled=True),
            FilePosition("binlog.000001"),
            blocking=False,
            reconnect=False,
        )
        mirror = Mirror(str(tmp_path / "mirror"))
        try:
            for item in client.events():
                mirror.write(item)  # type: ignore[arg-type]
        finally:
            mirror.close()
    for f in sorted(global_binlog.glob("binlog.0*")):
        assert (tmp_path / "mirror" / f.name).read_bytes() == f.read_bytes(), f.name


def test_show_statements_answer_from_the_directory(global_binlog: Path) -> None:
    with serving(global_binlog) as port:
        conn = pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                logs = cur.fetchall()
                cur.execute("SHOW MASTER STATUS")
                status = cur.fetchone()
                cur.execute("SHOW BINARY LOG STATUS")
                assert cur.fetchone() == status
                cur.execute("SELECT @@global.binlog_checksum, @@server_id")
                assert cur.fetchone() == ("CRC32", "1")
                cur.execute("SHOW GLOBAL VARIABLES LIKE 'binlog_checksum'")
                assert cur.fetchall() == (("binlog_checksum", "CRC32"),)
                cur.execute("SELECT VERSION()")
                assert cur.fetchone()[0] == "5.7.44-binlake"
                cur.execute("SELECT @@gtid_mode, @@global.gtid_executed")  # a global binlog has GTIDs
                gtid_mode, executed = cur.fetchone()
                for sql in ("SELECT * FROM mysql.user", "SELECT @@nonexistent_variable", "DROP TABLE t"):
                    with pytest.raises(pymysql.err.MySQLError) as err:
                        cur.execute(sql)
                    assert err.value.args[0] in (1193, 1235)
                cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum, @x = 'it''s'")
                cur.execute("SELECT @master_binlog_checksum, @x")
                assert cur.fetchone() == ("CRC32", "it's")
        finally:
            conn.close()
    files = sorted(global_binlog.glob("binlog.0*"))
    assert logs == tuple((f.name, f.stat().st_size) for f in files)
    assert status[:2] == (files[-1].name, files[-1].stat().st_size)
    assert (gtid_mode, executed, status[4]) == (
        "ON",
        *[f"{GLOBAL_UUID}:1-{len(file_transactions(global_binlog))}"] * 2,
    )


# -- real corpus series --------------------------------------------------------------------------


@needs_mariadb_binlog
@pytest.mark.parametrize("name", ["mysql80-gtid", "sakila", "checksum-none", "canal", "mariadb103"])
def test_corpus_series_over_the_wire_equal_the_files(
    name: str, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    directory = corpus_series(name, tmp_path_factory.getbasetemp() / "corpus")
    files = BinlogSeries.open(directory).files
    expected = file_transactions(directory)
    # mariadb-binlog refuses a server whose version starts with 8 (MySQL 8): say 5.7, as --server-version can
    version = "5.7.44-binlake" if name == "mysql80-gtid" else None
    with serving(directory, version=version) as port:
        for f in files:
            assert without_fake_rotates(remote_text(port, f.name)) == local_text(f, tmp_path).splitlines(), (
                f.name
            )
        assert served_transactions(port, FilePosition(files[0].name)) == expected
    assert expected


def test_gtid_dump_leaves_out_what_the_replica_has(tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = corpus_series("mysql80-gtid", tmp_path_factory.getbasetemp() / "corpus")
    expected = file_transactions(directory)
    gtids = [str(t[1]) for t in expected if t[1]]
    assert len(gtids) >= 6
    have = GtidSet.parse(",".join(gtids[:4]))
    with serving(directory) as port:
        got = served_transactions(port, GtidStart(str(have)))
    assert [t[1] for t in got] == [g for g in gtids if g not in have]
    assert got == [t for t in expected if t[1] not in have]


def test_python_mysql_replication_on_the_sakila_corpus(tmp_path_factory: pytest.TempPathFactory) -> None:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    directory = corpus_series("sakila", tmp_path_factory.getbasetemp() / "corpus")
    expected = [
        (ev.body.table.table, len(ev.body.rows))
        for _, ev in BinlogSeries.open(directory).events()
        if isinstance(ev.body, Rows)
    ]
    with serving(directory) as port:
        stream = BinLogStreamReader(
            connection_settings={"host": "127.0.0.1", "port": port, "user": USER, "passwd": PASSWORD},
            server_id=4243, blocking=False, log_file="mysql-bin.000001", log_pos=4, resume_stream=True,
            only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], ignore_decode_errors=True,
        )  # fmt: skip
        try:
            got = [(ev.table, len(ev.rows)) for ev in stream]
        finally:
            stream.close()
    assert got == expected and len(got) > 100


# -- refusals ------------------------------------------------------------------------------------


def test_a_wrong_password_or_user_is_refused(global_binlog: Path) -> None:
    with serving(global_binlog) as port:
        for user, pw in ((USER, "wrong"), ("root", PASSWORD), (USER, "")):
            with pytest.raises(pymysql.err.OperationalError) as err:
                pymysql.connect(host="127.0.0.1", port=port, user=user, password=pw)
            assert err.value.args[0] == 1045
            assert "Access denied" in err.value.args[1]
        # the server goes on serving
        pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD).close()


@needs_mariadb_binlog
def test_mariadb_binlog_with_a_wrong_password_fails(global_binlog: Path) -> None:
    with serving(global_binlog) as port:
        with pytest.raises(subprocess.CalledProcessError) as err:
            remote_text(port, "binlog.000001", password="nope")
    assert "Access denied for user 'repl'" in err.value.stderr


def test_a_missing_file_or_a_position_inside_an_event_is_an_error(global_binlog: Path) -> None:
    from binlake.errors import ReplicationError

    with serving(global_binlog) as port:
        with pytest.raises(ReplicationError, match="1236.*Could not find first log file"):
            served_transactions(port, FilePosition("binlog.999999"))
        with pytest.raises(ReplicationError, match="not the start of an event"):
            served_transactions(port, FilePosition("binlog.000001", 125))
        with pytest.raises(ReplicationError, match="position > file size"):
            served_transactions(port, FilePosition("binlog.000001", 10**9))


def test_the_cli_serves_until_terminated(global_binlog: Path, tmp_path: Path) -> None:
    import signal
    import sys

    secret = tmp_path / "pw"
    secret.write_text(PASSWORD + "\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "binlake", "serve", str(global_binlog), "--port", "0", "--password-file", str(secret)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        port = int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1))  # type: ignore[union-attr]
        assert served_transactions(port, FilePosition("binlog.000001")) == file_transactions(global_binlog)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    no_pw = subprocess.run(
        [sys.executable, "-m", "binlake", "serve", str(global_binlog), "--port", "0"],
        capture_output=True, text=True, env={k: v for k, v in env.items() if k != "BINLAKE_SERVE_PASSWORD"},
    )  # fmt: skip
    assert no_pw.returncode == 2 and "needs the replicas' password" in no_pw.stderr
