"""MariaDB binlog variants on real servers: compressed events (``log_bin_compress``), MINIMAL and
NOBLOB row images, and every event MariaDB writes checked against ``mariadb-binlog``."""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake.events.rows import ABSENT, Rows
from binlake.reader import read_events
from binlake.sandbox import PrivateMariaDB, mariadb_available
from tests.support.alltypes import comparable, run_workload, select_rows
from tests.test_live_mariadb import replay

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not mariadb_available(), reason="mariadbd is not installed (./dev setup installs it)"),
]


@pytest.fixture(scope="module")
def compressed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrivateMariaDB, list[Path]]]:
    db = PrivateMariaDB(
        tmp_path_factory.mktemp("compressed"), log_bin_compress="ON", log_bin_compress_min_len="10"
    )
    db.start()
    try:
        run_workload(db)
        db.execute(
            "CREATE DATABASE img",
            "CREATE TABLE img.t (id INT PRIMARY KEY, a VARCHAR(20), b INT, big TEXT)",
            "INSERT INTO img.t VALUES (1, 'one', 10, REPEAT('x', 100)), (2, 'two', 20, 'y')",
        )
        conn = db.connect("img")
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
            cur.execute("UPDATE t SET b = 11 WHERE id = 1")
            cur.execute("DELETE FROM t WHERE id = 2")
            cur.execute("SET SESSION binlog_row_image = 'NOBLOB'")
            cur.execute("UPDATE t SET a = 'uno' WHERE id = 1")
        conn.close()
        yield db, db.flush_binlogs()[:-1]
    finally:
        db.stop()


def test_compressed_events_decode_to_select(compressed: tuple[PrivateMariaDB, list[Path]]) -> None:
    db, files = compressed
    kinds = collections.Counter(ev.type_name for f in files for ev in read_events(f))
    assert kinds["MARIA_QUERY_COMPRESSED"] > 0
    assert kinds["MARIA_WRITE_ROWS_COMPRESSED_V1"] + kinds["MARIA_WRITE_ROWS_COMPRESSED"] > 0
    assert kinds["MARIA_UPDATE_ROWS_COMPRESSED_V1"] + kinds["MARIA_UPDATE_ROWS_COMPRESSED"] > 0
    decoded, _ = replay(files)
    selected = select_rows(db)
    assert sorted(decoded) == sorted(selected)
    for pk, row in selected.items():
        for col, want in row.items():
            got, exp = comparable(decoded[pk][col], want, col)
            assert got == exp, (pk, col)


def test_minimal_and_noblob_images(compressed: tuple[PrivateMariaDB, list[Path]]) -> None:
    _, files = compressed
    changes = [
        (ev.body.operation, before, after)
        for f in files
        for ev in read_events(f)
        if isinstance(ev.body, Rows) and ev.body.table is not None and ev.body.table.table == "t"
        for before, after in ev.body.rows
    ]
    minimal_update, minimal_delete, noblob_update = changes[2], changes[3], changes[4]
    assert minimal_update == ("update", [1, ABSENT, ABSENT, ABSENT], [ABSENT, ABSENT, 11, ABSENT])
    assert minimal_delete == ("delete", [2, ABSENT, ABSENT, ABSENT], None)
    op, before, after = noblob_update
    assert before == [1, "one", 11, ABSENT] and after == [1, "uno", 11, ABSENT]


@pytest.mark.skipif(shutil.which("mariadb-binlog") is None, reason="mariadb-binlog missing")
def test_compressed_rows_agree_with_mariadb_binlog(compressed: tuple[PrivateMariaDB, list[Path]]) -> None:
    from tests.test_crosscheck_mariadb_binlog import normalise

    def rows(cmd: list[str]) -> list[bytes]:
        out = subprocess.run(cmd, capture_output=True, check=True, env={**os.environ, "TZ": "UTC"}).stdout
        return [line for line in out.split(b"\n") if line.startswith(b"###") or line.startswith(b"#Q>")]

    _, files = compressed
    for f in files:
        theirs = rows(["mariadb-binlog", "-vv", "--base64-output=decode-rows", str(f)])
        ours = rows([sys.executable, "-m", "binlake.cli", "dump", "--positional", str(f)])
        assert len(theirs) == len(ours) and theirs
        assert not [(t, o) for t, o in zip(theirs, ours, strict=True) if normalise(t, o)]


def _gtid_lines(text: bytes) -> list[bytes]:
    keep = (b"GTID ", b"Gtid list", b"Binlog checkpoint", b"Xid = ", b"Table_map: ")
    out = []
    for line in text.split(b"\n"):
        if line.startswith(b"#") and b"server id" in line and b"end_log_pos" in line:
            tail = line.split(b"\t", 1)[-1]
            if tail.startswith(keep):
                out.append(line.split(b" server id ", 1)[1])
    return out


@pytest.mark.skipif(shutil.which("mariadb-binlog") is None, reason="mariadb-binlog missing")
def test_event_headers_agree_with_mariadb_binlog(
    compressed: tuple[PrivateMariaDB, list[Path]], mariadb: Any
) -> None:
    """GTID, GTID list, checkpoint, XID and table-map lines: positions, CRCs and values."""
    _, files = compressed
    for f in files + mariadb.binlog_files()[:1]:
        theirs = subprocess.run(
            ["mariadb-binlog", str(f)], capture_output=True, env={**os.environ, "TZ": "UTC"}
        ).stdout
        ours = subprocess.run(
            [sys.executable, "-m", "binlake.cli", "dump", str(f)], capture_output=True
        ).stdout
        t, o = _gtid_lines(theirs), _gtid_lines(ours)
        assert t and t == o
