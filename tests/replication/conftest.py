"""A private MariaDB per test module, set up to be replicated from: 64 MiB packets (events over the
16 MiB packet limit) and TLS with a certificate of a test CA (``db.pki``; None without openssl)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@dataclass(frozen=True)
class Pki:
    """Test certificates: ``ca`` signed ``server`` (for 127.0.0.1 and localhost) and ``wrong_host``
    (for another name); ``other_ca`` signed nothing the server shows."""

    ca: Path
    other_ca: Path
    server: tuple[Path, Path]  # certificate, key
    wrong_host: tuple[Path, Path]


def make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}-key.pem"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
        "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert),
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    return cert, key


def make_server_cert(directory: Path, ca: tuple[Path, Path], name: str, san: str) -> tuple[Path, Path]:
    """A server certificate signed by ``ca`` for ``san`` (e.g. ``IP:127.0.0.1,DNS:localhost``)."""
    cert, key, csr = (directory / f"{name}{suffix}.pem" for suffix in ("", "-key", "-csr"))
    ext = directory / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\nextendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n")
    first = san.split(",")[0].split(":", 1)[1]
    _openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-subj", f"/CN={first}", "-keyout", str(key), "-out", str(csr),
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
        "-days", "2", "-extfile", str(ext), "-out", str(cert),
    )  # fmt: skip
    return cert, key


def make_pki(directory: Path) -> Pki:
    ca = make_ca(directory, "test-ca")
    return Pki(
        ca=ca[0],
        other_ca=make_ca(directory, "other-ca")[0],
        server=make_server_cert(directory, ca, "server", "IP:127.0.0.1,DNS:localhost"),
        wrong_host=make_server_cert(directory, ca, "wrong-host", "DNS:elsewhere.invalid"),
    )


@pytest.fixture(scope="module")
def source_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from binlake.sandbox import PrivateMariaDB, mariadb_available

    if not mariadb_available() or shutil.which("mariadb-install-db") is None:
        pytest.skip("mariadbd is not installed (apt-get install mariadb-server; .ci/run does it)")
    root = tmp_path_factory.mktemp("replica-source")
    settings = {"max_allowed_packet": "64M", "gtid_strict_mode": "ON"}
    pki = make_pki(root) if shutil.which("openssl") else None
    if pki is not None:  # the server reads copies, which a test may swap for others (FLUSH SSL)
        shutil.copy(pki.server[0], root / "live-cert.pem")
        shutil.copy(pki.server[1], root / "live-key.pem")
        settings.update(ssl_cert=str(root / "live-cert.pem"), ssl_key=str(root / "live-key.pem"))
    db = PrivateMariaDB(root / "server", **settings)
    db.start()
    db.pki = pki  # type: ignore[attr-defined]
    yield db
    db.stop()
