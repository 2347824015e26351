"""Every row line ``binlake dump --positional`` prints for the real corpus equals what the independent
decoder ``mariadb-binlog -vv`` prints, but for differences listed here with their reason."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import corpus_index
from tests.support.rowlines import normalise, row_lines, run
from tests.support.rowlines import ours as dump  # in this process: a process per file cost ~1 min

# mariadb-binlog cannot print these (it shows no rows, or fails): our rows are checked elsewhere.
THEY_CANNOT = {
    "osheroff-mysql-binlog-connector-java/mysql-bin.compressed": "TRANSACTION_PAYLOAD (zstd) not supported",
    "blackbeam-rust_mysql_common/transaction_compression.000001": "TRANSACTION_PAYLOAD (zstd) not supported",
    "blackbeam-rust_mysql_common/json.binlog.000001": "MySQL binary JSON not supported",
    "blackbeam-rust_mysql_common/json-opaque.binlog": "MySQL binary JSON not supported",
    "blackbeam-rust_mysql_common/vector.binlog": "MySQL 9 VECTOR not supported",
    "blackbeam-rust_mysql_common/binlog_transaction_with_GTID_TAG.000001": "GTID_TAGGED event not supported",
}


def _rows(cmd: list[str]) -> list[bytes]:
    return row_lines(run(cmd).stdout)


RECORDS = [r for r in corpus_index()["records"]]


@pytest.mark.skipif(
    shutil.which("mariadb-binlog") is None, reason="mariadb-binlog (Debian mariadb-client) missing"
)
@pytest.mark.parametrize("record", RECORDS, ids=[r["path"] for r in RECORDS])
def test_row_lines_match_mariadb_binlog(corpus: Path, record: dict) -> None:
    path = str(corpus / record["path"])
    theirs = _rows(["mariadb-binlog", "-vv", "--base64-output=decode-rows", path])
    ours = row_lines(dump(path))
    if record["path"] in THEY_CANNOT:
        assert not theirs, "mariadb-binlog learned to print this file: move it out of THEY_CANNOT"
        if record["path"] != "blackbeam-rust_mysql_common/binlog_transaction_with_GTID_TAG.000001":
            assert ours, "we must print the rows mariadb-binlog cannot"
        return
    assert len(ours) == len(theirs), f"{len(ours)} row lines, mariadb-binlog {len(theirs)}"
    bad = [(t, o) for t, o in zip(theirs, ours, strict=True) if normalise(t, o)]
    assert not bad, bad[:3]


@pytest.mark.skipif(
    shutil.which("mariadb-binlog") is None, reason="mariadb-binlog (Debian mariadb-client) missing"
)
def test_generated_mariadb_series_read_by_mariadb_binlog(tmp_path: Path) -> None:
    """What our writer writes, an independent decoder reads: every file of a generated series, no
    error, the same row lines (a MariaDB format event one post-header length short made it stop at
    the first GTID_LIST). MariaDB flavour only: mariadb-binlog cannot print MySQL's JSON type, which
    the MySQL flavours write."""
    from binlake.generate import generate

    files = generate(
        tmp_path / "bin", seed=5, target_bytes=60_000, max_file_size=30_000, flavor="mariadb"
    ).files
    compared = 0
    for f in files:
        done = subprocess.run(
            ["mariadb-binlog", "-vv", "--base64-output=decode-rows", str(f)],
            capture_output=True,
            env={**os.environ, "TZ": "UTC"},
            timeout=120,
        )
        assert done.returncode == 0 and b"ERROR" not in done.stderr, done.stderr[-500:]
        theirs = [line for line in done.stdout.split(b"\n") if line.startswith(b"###")]
        ours = row_lines(dump(f))
        assert len(ours) == len(theirs), f"{f.name}: {len(ours)} row lines, mariadb-binlog {len(theirs)}"
        bad = [(t, o) for t, o in zip(theirs, ours, strict=True) if normalise(t, o)]
        assert not bad, bad[:3]
        compared += len(theirs)
    assert compared > 100
