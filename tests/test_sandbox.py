"""Private servers start even when the port chosen for them is taken before they bind it (tests run
in parallel workers, each starting its own servers; an outgoing connection can take a free port too)."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from binlake.sandbox import PortTaken, PrivateMariaDB, PrivatePostgres, mariadb_available, postgres_bin


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port someone else listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_a_server_whose_port_is_taken_starts_on_another(tmp_path: Path, taken: int) -> None:
    if not mariadb_available() or shutil.which("mariadb-install-db") is None:
        pytest.skip("mariadbd is not installed (./dev setup installs it)")
    db = PrivateMariaDB(tmp_path / "m")
    db.port = taken
    with db:
        assert db.port != taken
        conn = db.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@port")
                assert cur.fetchone() == (db.port,)  # the server runs on the port it reports
        finally:
            conn.close()
        moved = db.port
    with socket.socket() as s:  # a restart keeps its port: taken meanwhile, it says so
        s.bind(("127.0.0.1", moved))
        s.listen()
        with pytest.raises(PortTaken, match=f"port {moved} is taken"):
            db.start()
    db.stop()
    db.start()  # free again: the same port
    assert db.port == moved
    db.stop()


def test_postgres_whose_port_is_taken_starts_on_another(taken: int) -> None:
    if postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed (./dev setup installs it)")
    pg = PrivatePostgres()
    pg.port = taken
    with pg:
        assert pg.port != taken
        assert pg.psql("SHOW port").strip() == str(pg.port)


def test_a_new_server_on_a_datadir_that_ran_before_moves_off_a_taken_port(tmp_path: Path, taken: int) -> None:
    """Only a restart keeps its port: a new server object over a datadir another one ran on (a
    benchmark's kept server, a copied datadir) chose its port itself and has told no one yet."""
    if not mariadb_available() or shutil.which("mariadb-install-db") is None:
        pytest.skip("mariadbd is not installed (./dev setup installs it)")
    PrivateMariaDB(tmp_path / "m").start().stop()
    db = PrivateMariaDB(tmp_path / "m")
    db.port = taken
    with db:
        assert db.port != taken
        db.execute("SELECT 1")
