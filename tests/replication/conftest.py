"""A private MariaDB per test module, set up to be replicated from: 64 MiB packets (events over the
16 MiB packet limit) and TLS with a self-signed certificate."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "server-cert.pem", directory / "server-key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def source_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from binlake.sandbox import PrivateMariaDB, mariadb_available

    if not mariadb_available() or shutil.which("mariadb-install-db") is None:
        pytest.skip("mariadbd is not installed (apt-get install mariadb-server; .ci/run does it)")
    root = tmp_path_factory.mktemp("replica-source")
    settings = {"max_allowed_packet": "64M", "gtid_strict_mode": "ON"}
    if shutil.which("openssl"):
        cert, key = self_signed(root)
        settings.update(ssl_cert=str(cert), ssl_key=str(key))
    db = PrivateMariaDB(root / "server", **settings)
    db.start()
    db.tls_cert = settings.get("ssl_cert")  # type: ignore[attr-defined]
    yield db
    db.stop()
