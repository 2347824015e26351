"""Every --ssl-mode against a private MariaDB whose certificate a test CA signed: the right CA, another
CA, a certificate for another host (swapped in with FLUSH SSL) and a server without TLS (a restart).
Whether a connection is encrypted is asked of the server (``Ssl_cipher``), not of the client."""

from __future__ import annotations

import shutil
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from binlake.errors import ReplicationError
from binlake.replication.client import (
    CR_SSL_CONNECTION_ERROR,
    Reconnected,
    ReplicaClient,
    ServerAddress,
    SslMode,
    retryable,
)
from binlake.replication.stream import StreamEvent

pytestmark = pytest.mark.slow
PASSWORD = "tls-s3cret"


@pytest.fixture(scope="module")
def db(source_db: Any) -> Any:
    if source_db.pki is None:
        pytest.skip("openssl is not installed: no certificates for the TLS tests")
    source_db.execute(
        "CREATE USER 'repl'@'%' IDENTIFIED BY 'tls-s3cret'",  # TLS optional for it: the mode decides
        "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'repl'@'%'",
        "CREATE DATABASE tls",
        "CREATE TABLE tls.t (id INT PRIMARY KEY)",
    )
    return source_db


def tcp(db: Any, mode: str | None = None, ca: Path | None = None, **kw: Any) -> ServerAddress:
    return ServerAddress(
        "127.0.0.1", db.port, "repl", PASSWORD, ssl_mode=mode, ssl_ca=str(ca) if ca else None, **kw
    )


def cipher(address: ServerAddress) -> str:
    """The server's word on the connection ``address`` makes: its TLS cipher, "" for plain."""
    conn = address.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            return str(cur.fetchone()[1])
    finally:
        conn.close()


def refused(address: ServerAddress, why: str) -> ReplicationError:
    with pytest.raises(ReplicationError) as e:
        address.connect()
    err = e.value
    assert err.code == CR_SSL_CONNECTION_ERROR and not retryable(err), err
    assert why in str(err) and "\n" not in str(err) and PASSWORD not in str(err)
    return err


@contextmanager
def serving(db: Any, pair: tuple[Path, Path]) -> Iterator[None]:
    """The server shows this certificate and key (FLUSH SSL reloads them) until the block ends."""
    live = (Path(db.settings["ssl_cert"]), Path(db.settings["ssl_key"]))
    saved = [f.read_bytes() for f in live]
    for src, dst in zip(pair, live, strict=True):
        shutil.copy(src, dst)
    db.execute("FLUSH SSL")
    try:
        yield
    finally:
        for data, dst in zip(saved, live, strict=True):
            dst.write_bytes(data)
        db.execute("FLUSH SSL")


def test_each_mode_with_the_right_ca(db: Any) -> None:
    ca = db.pki.ca
    assert cipher(tcp(db, "DISABLED")) == ""
    assert cipher(tcp(db, ssl_disabled=True)) == ""  # --no-ssl
    assert cipher(tcp(db)) != ""  # PREFERRED by default: the server offers TLS
    assert cipher(tcp(db, "PREFERRED")) != ""
    assert cipher(tcp(db, "REQUIRED")) != ""  # no CA: any certificate
    assert cipher(tcp(db, "VERIFY_CA", ca)) != ""
    assert cipher(tcp(db, "VERIFY_IDENTITY", ca)) != ""  # the certificate names 127.0.0.1
    assert tcp(db, ca=ca).tls_mode is SslMode.VERIFY_CA  # a CA alone verifies, as in the MySQL client
    assert tcp(db, "REQUIRED", ca).tls_mode is SslMode.VERIFY_CA
    sock = ServerAddress(unix_socket=db.socket, user="repl", password=PASSWORD)
    assert cipher(sock) == ""  # PREFERRED leaves a Unix socket plain, as the MySQL client does
    assert (
        cipher(ServerAddress(unix_socket=db.socket, user="repl", password=PASSWORD, ssl_mode="REQUIRED"))
        != ""
    )


def test_another_ca_is_refused_whatever_mode_carries_it(db: Any) -> None:
    other = db.pki.other_ca
    for mode in ("VERIFY_CA", "VERIFY_IDENTITY", "REQUIRED", "PREFERRED", None):
        err = refused(tcp(db, mode, other), "TLS certificate was refused")
        assert "unable to get local issuer certificate" in str(err), err
    refused(tcp(db, "VERIFY_CA"), "needs --ssl-ca")  # nothing to verify with: not a silent REQUIRED
    missing = other.parent / "missing.pem"
    refused(tcp(db, "VERIFY_CA", missing), f"cannot load the TLS files (--ssl-ca {missing}): No such file")


def test_a_certificate_for_another_host(db: Any) -> None:
    ca = db.pki.ca
    with serving(db, db.pki.wrong_host):
        err = refused(tcp(db, "VERIFY_IDENTITY", ca), "TLS host name was refused")
        assert "127.0.0.1" in str(err)
        assert cipher(tcp(db, "VERIFY_CA", ca)) != ""  # the chain is right: VERIFY_CA does not look at names
        assert cipher(tcp(db, "REQUIRED")) != ""
    assert cipher(tcp(db, "VERIFY_IDENTITY", ca)) != ""  # the right certificate is back


def test_the_dump_itself_runs_over_tls_and_a_changed_certificate_ends_it(db: Any) -> None:
    """The client reads the binlog from the socket itself after PyMySQL's handshake: that socket must
    be the TLS one, and the session the server dumps to must be the encrypted one. When the server
    comes back with a certificate that fails the check, the client stops at once instead of retrying."""
    seen: list[tuple[int, str]] = []

    def record(conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute("SELECT CONNECTION_ID(), (SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS"
                        " WHERE VARIABLE_NAME = 'SSL_CIPHER')")  # fmt: skip
            row = cur.fetchone()
            seen.append((int(row[0]), str(row[1])))

    client = ReplicaClient(
        tcp(db, "VERIFY_IDENTITY", db.pki.ca), "current", heartbeat=1.0, on_connect=record, give_up_after=60
    )
    events = client.events()
    next(events)  # the dump has started
    assert isinstance(client._conn._sock, ssl.SSLSocket)
    root = db.connect()
    with root.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'")
        dumping = [int(r[0]) for r in cur.fetchall()]
    assert len(seen) == 1 and seen[0][1] and dumping == [seen[0][0]]
    db.execute("INSERT INTO tls.t VALUES (1)")
    deadline = time.monotonic() + 20
    for item in events:  # the row arrives through the encrypted stream, then its commit
        assert time.monotonic() < deadline, "the row never came"
        if isinstance(item, StreamEvent) and any(ev.type_name == "XID" for ev in item.events):
            break
    reconnects = 0
    with serving(db, db.pki.wrong_host), pytest.raises(ReplicationError) as e:
        with root.cursor() as cur:
            cur.execute(f"KILL {seen[0][0]}")
        t0 = time.monotonic()
        for item in events:  # what was on the way, one Reconnected, then the refusal: nothing after it
            assert reconnects == 0, f"the client went on with a certificate it should refuse: {item}"
            reconnects += isinstance(item, Reconnected)
    root.close()
    assert time.monotonic() - t0 < 10  # one attempt, not 60 s of retries
    assert e.value.code == CR_SSL_CONNECTION_ERROR and "host name was refused" in str(e.value)
    assert reconnects == 1
    assert len(seen) == 1  # no session was opened with the wrong certificate


def test_a_server_without_tls(db: Any) -> None:
    tls = {k: db.settings[k] for k in ("ssl_cert", "ssl_key")}
    db.restart(ssl_cert=None, ssl_key=None)
    try:
        with db.connect().cursor() as cur:
            cur.execute("SELECT @@have_ssl")
            assert cur.fetchone()[0] == "DISABLED"  # the premise: this server cannot do TLS
        refused(tcp(db, "REQUIRED"), "the server does not offer TLS, which --ssl-mode REQUIRED requires")
        refused(tcp(db, "VERIFY_CA", db.pki.ca), "does not offer TLS")
        assert cipher(tcp(db, "PREFERRED")) == ""  # falls back to plain
        assert cipher(tcp(db)) == ""
        assert cipher(tcp(db, "DISABLED")) == ""
    finally:
        db.restart(**tls)
    assert cipher(tcp(db, "REQUIRED")) != ""
