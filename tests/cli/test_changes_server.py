"""``binlake changes mysql://…``: row changes read from a live server as a replica (MariaDB and MySQL,
each a private server): the same lines as reading its binlog files, the URL's database exact (a
hostile name is no pattern), names from the server's catalog where the binlog has none, and
``--follow`` printing each commit as it happens, once, across a dropped connection, until SIGTERM."""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from binlake.sandbox import PrivateMariaDB, PrivateServer, mariadb_available
from tests.render.pinned import run_cli

HOSTILE_DB = "x*y`'\\"  # glob characters, a backtick, a quote, a backslash
TWIN_DB = "xzy`'\\"  # what HOSTILE_DB read as a pattern would also match


@pytest.fixture(params=["mariadb", "mysql"])
def server(request: pytest.FixtureRequest) -> PrivateServer:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def url(db: PrivateServer, *databases: str) -> str:
    return f"mysql://root@127.0.0.1:{db.port}/" + ",".join(quote(d, safe="") for d in databases)


def lines(argv: list[str]) -> list[dict[str, Any]]:
    status, out = run_cli(["changes", *argv])
    assert status == 0
    return [json.loads(line) for line in out.decode("utf-8", "surrogateescape").splitlines()]


def workload(db: PrivateServer, name: str) -> None:
    q = _ident(name)
    db.execute(
        f"DROP DATABASE IF EXISTS {q}",
        f"CREATE DATABASE {q}",
        f"CREATE TABLE {q}.t (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2), j JSON)",
        f"""INSERT INTO {q}.t VALUES (1, 'a', 1.50, '{{"k": [1, 2]}}'), (2, 'it''s', -3.25, NULL)""",
        f"UPDATE {q}.t SET v = 'b' WHERE id = 1",
        f"ALTER TABLE {q}.t ADD COLUMN w INT DEFAULT 7",
        f"UPDATE {q}.t SET id = 20, w = 8 WHERE id = 2",
        f"DELETE FROM {q}.t WHERE id = 1",
    )


def test_a_server_read_equals_its_files_and_its_url_names_databases_exactly(server: PrivateServer) -> None:
    workload(server, HOSTILE_DB)
    workload(server, TWIN_DB)
    got = lines([url(server, HOSTILE_DB)])
    files = [str(f) for f in server.flush_binlogs()]
    want = [c for c in lines(files) if c["database"] == HOSTILE_DB]
    assert got == want
    assert [(c["type"], c["key"]) for c in got] == [
        ("insert", {"id": 1}),
        ("insert", {"id": 2}),
        ("update", {"id": 1}),
        ("update", {"id": 20}),
        ("delete", {"id": 1}),
    ]
    assert got[3]["before"]["v"] == "it's" and got[3]["after"]["w"] == 8  # named after the ALTER
    assert {c["database"] for c in lines([url(server, TWIN_DB)])} == {TWIN_DB}


def test_names_come_from_the_server_catalog_when_the_binlog_has_none(tmp_path: Path) -> None:
    """A MINIMAL-metadata server: names from its catalog, read at its binlog end. Read from its
    oldest binlog, a table whose columns were swapped since keeps @N names before the swap (today's
    names would be wrong there), said on stderr; a table without DDL since is named throughout."""
    if not mariadb_available():
        pytest.skip("mariadbd is not installed (apt-get install mariadb-server; .ci/run does it)")
    with PrivateMariaDB(tmp_path / "m", binlog_row_metadata="MINIMAL") as minimal:
        minimal.execute(
            "CREATE DATABASE app",
            "CREATE TABLE app.u (id INT PRIMARY KEY, a VARCHAR(9), b VARCHAR(9))",
            "CREATE TABLE app.v (id INT PRIMARY KEY, name VARCHAR(9))",
            "INSERT INTO app.u VALUES (1, 'A', 'B')",
            "INSERT INTO app.v VALUES (1, 'ann')",
            "ALTER TABLE app.u RENAME COLUMN a TO tmp",
            "ALTER TABLE app.u RENAME COLUMN b TO a",
            "ALTER TABLE app.u RENAME COLUMN tmp TO b",
            "INSERT INTO app.u VALUES (2, 'C', 'D')",
            "UPDATE app.v SET name = 'bo' WHERE id = 1",
        )
        from binlake.cli import main

        raw = io.BytesIO()
        out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
            assert main(["changes", url(minimal, "app")]) == 0
        got = [json.loads(line) for line in raw.getvalue().decode().splitlines()]
        bare = lines([str(f) for f in minimal.flush_binlogs()[:-1]])
    assert [(c["table"], c["after"]) for c in got] == [
        ("u", {"@1": 1, "@2": "A", "@3": "B"}),  # before the swap: its layout then is not known
        ("v", {"id": 1, "name": "ann"}),
        ("u", {"id": 2, "b": "C", "a": "D"}),
        ("v", {"id": 1, "name": "bo"}),
    ]
    assert "app.u named @N" in err.getvalue() and "app.v" not in err.getvalue()
    # the files read from their CREATE TABLE on know the names before the swap (today's would be
    # wrong there: a and b trade places), and agree with the server read from the swap on
    assert [c["after"] for c in bare] == [
        {"id": 1, "a": "A", "b": "B"},
        {"id": 1, "name": "ann"},
        {"id": 2, "b": "C", "a": "D"},
        {"id": 1, "name": "bo"},
    ]


def test_follow_prints_each_commit_until_sigterm(server: PrivateServer) -> None:
    name = "follow_me"
    server.execute(
        f"DROP DATABASE IF EXISTS {name}",
        f"CREATE DATABASE {name}",
        f"CREATE TABLE {name}.t (id INT PRIMARY KEY)",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "binlake.cli", "changes", "--follow", url(server, name)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
    )
    got: queue.Queue[bytes] = queue.Queue()
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: [got.put(line) for line in proc.stdout], daemon=True)  # type: ignore[union-attr]
    reader.start()

    def next_line(timeout: float) -> dict[str, Any] | None:
        try:
            return json.loads(got.get(timeout=timeout))  # type: ignore[no-any-return]
        except queue.Empty:
            return None

    try:
        # --follow starts at the server's end: probes until one is printed say it is reading
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        probe = 0
        while not seen and time.monotonic() < deadline:
            probe += 1
            server.execute(f"INSERT INTO {name}.t VALUES ({probe})")
            line = next_line(2.0)
            if line:
                seen.append(line)
        assert seen, "no line from changes --follow within 60 s"
        first = seen[0]["after"]["id"]
        for i in range(1000, 1010):
            server.execute(f"INSERT INTO {name}.t VALUES ({i})")
        # the dump connection dropped mid-stream: it reconnects at the last whole transaction
        conn = server.connect()
        with conn.cursor() as cur:
            cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
            dumps = [r[0] for r in cur.fetchall()]
            assert len(dumps) == 1
            cur.execute(f"KILL CONNECTION {dumps[0]}")
        conn.close()
        for i in range(1010, 1020):
            server.execute(f"INSERT INTO {name}.t VALUES ({i})")
        server.execute(f"UPDATE {name}.t SET id = id + 1 WHERE id = 1019")
        while (line := next_line(30.0)) is not None:
            seen.append(line)
            if line["type"] == "update":
                break
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    while not got.empty():
        seen.append(json.loads(got.get()))
    assert proc.returncode == 0, err.decode()[-500:]
    assert "reconnected after" in err.decode()
    ids = [c["after"]["id"] for c in seen]
    # each once, in commit order, across the reconnect
    assert ids == [*range(first, probe + 1), *range(1000, 1020), 1020]
    assert seen[-1]["type"] == "update" and seen[-1]["before"]["id"] == 1019


def test_a_password_user_on_mysql_with_and_without_tls(
    mysql: PrivateServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MySQL's default authentication (caching_sha2_password) sends the password RSA-encrypted when
    the connection is not TLS: the first, full authentication of a new user, both ways; a wrong
    password is one line naming the server."""
    mysql.execute(
        "DROP USER IF EXISTS 'cdc'@'127.0.0.1'",
        "CREATE USER 'cdc'@'127.0.0.1' IDENTIFIED BY 's3cret!'",
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'cdc'@'127.0.0.1'",
    )
    workload(mysql, "pw_db")
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.my.cnf
    monkeypatch.setenv("MYSQL_PWD", "s3cret!")
    base = f"mysql://cdc@127.0.0.1:{mysql.port}/pw_db"
    plain = lines([base + "?ssl-mode=DISABLED"])  # first: full authentication without TLS
    mysql.execute("FLUSH PRIVILEGES")  # forget it: the TLS run authenticates in full too
    assert len(plain) == 5 and lines([base + "?ssl-mode=REQUIRED"]) == plain
    monkeypatch.setenv("MYSQL_PWD", "wrong")
    mysql.execute("FLUSH PRIVILEGES")  # forget the cached authentication
    from binlake.cli import main

    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(["changes", base + "?ssl-mode=DISABLED"]) == 2
    assert err.getvalue() == (
        f"binlake: error: 127.0.0.1:{mysql.port}: cannot connect: "
        "Access denied for user 'cdc'@'127.0.0.1' (using password: YES)\n"
    )


def test_start_after_a_gtid_set(server: PrivateServer) -> None:
    """``--gtid``: the changes after the transactions the set holds (COM_BINLOG_DUMP_GTID on MySQL,
    the GTID position on MariaDB)."""
    workload(server, "by_gtid")
    everything = lines([url(server, "by_gtid")])
    cut = everything[2]["source"]["gtid"]  # the first UPDATE's transaction
    if ":" in cut:  # MySQL uuid:n -> the set of every transaction up to it
        uuid, n = cut.rsplit(":", 1)
        executed = f"{uuid}:1-{n}"
    else:  # MariaDB domain-server-seq: a position
        executed = cut
    assert lines([url(server, "by_gtid"), "--gtid", executed]) == everything[3:]
