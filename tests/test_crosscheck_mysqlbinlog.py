"""Every row line ``binlake dump --positional`` prints for the real corpus, and for a workload over
every column type of a private MySQL 9.7, equals what MySQL's own decoder, ``mysqlbinlog -vv`` 9.7,
prints, but for the differences ``normalise_mysql`` lists with their reason. Where it prints no rows
and we do, the file is listed here with why, and its error says so.

mariadb-binlog cannot print MySQL's compressed transactions, binary JSON, VECTOR or tagged GTIDs:
this is the independent check of those (``test_they_cover_what_mariadb_binlog_cannot``)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from binlake.sandbox import mysql_available, mysql_home
from binlake.values.json_binary import double_text
from tests.conftest import corpus_index
from tests.support.mysqltypes import run_workload
from tests.support.rowlines import (
    compare_mysql,
    normalise,
    normalise_mysql,
    our_partitions,
    ours,
    row_lines,
    run,
)
from tests.test_crosscheck_mariadb_binlog import THEY_CANNOT as MARIADB_BINLOG_CANNOT

_V1_ROWS = "v1 rows events (WRITE/UPDATE/DELETE_ROWS_V1, types 23-25: MySQL 5.1-5.5): MySQL 8.4 dropped them"
_STMT_END = "The range of printed events ends with a row event"  # it skipped each v1 event, then says so
_INVALID = "Found invalid event in binary log"

# files with rows mysqlbinlog 9.7 does not print: (why, what its error output says)
THEY_CANNOT: dict[str, tuple[str, str]] = {
    **{
        path: (_V1_ROWS, _STMT_END)
        for path in (
            "mysql-server-8.0.39/suite/binlog/std_data/update-full-row.binlog",
            "mysql-server-8.0.39/suite/binlog/std_data/update-partial-row.binlog",
            "mysql-server-8.0.39/suite/binlog/std_data/write-full-row.binlog",
            "mysql-server-8.0.39/suite/binlog/std_data/write-partial-row.binlog",
            "mysql-server-8.0.39/suite/binlog/std_data/ver_5_1_23.001",
            "osheroff-mysql-binlog-connector-java/mysql-bin.sakila",
            "alibaba-canal/dbsync/mysql-bin.000001",
            "alibaba-canal/parse/mysql-bin.000002",
        )
    },
    **{
        path: ("MariaDB file: its v1 rows events and MariaDB's own event types", _INVALID)
        for path in (
            "mariadb-server-10.3/std_data/mdev6020-mysql-bin.000001",
            "mariadb-server-10.3/std_data/rpl/master-bin-seq_10.3.36.000001",
            "blackbeam-rust_mysql_common/mariadb-bin.000001",
            "zalora-binlog-parser/fixtures/mysql-bin.07",
        )
    },
}

RECORDS = corpus_index()["records"]
needs_mysqlbinlog = pytest.mark.skipif(
    not mysql_available(), reason=f"mysqlbinlog is not at {mysql_home()} (scripts/fetch-mysql)"
)


def mysqlbinlog(path: Path) -> tuple[bytes, str]:
    """``mysqlbinlog -vv --base64-output=decode-rows``: its output and its last error or warning."""
    done = run([str(mysql_home() / "bin" / "mysqlbinlog"), "-vv", "--base64-output=decode-rows", str(path)])
    said = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return done.stdout, (said[-1] if said else "")


_VS = b" /* VARSTRING(40) meta=40 nullable=1 is_null=0 */"
_JS = b" /* JSON meta=4 nullable=1 is_null=0 */"
_V2 = b" meta=4 nullable=1 is_null=0 */"
_PARTIAL = b"JSON_REPLACE(@2, '$[1]', 'd\\'x', '$[2]', 99) /* JSON meta=4 nullable=1 is_null=0 */"
# (mysqlbinlog's line, ours, agree?): its dialect is undone, a different value is not
NORMALISED = [
    (b"###   @1='a\\'b\\\\c\\n\\x01'" + _VS, b"###   @1='a'b\\c\\x0a\\x01'" + _VS, True),
    (b"###   @1='a\\'b\\\\c\\n'" + _VS, b"###   @1='a'b\\c\\x0b'" + _VS, False),
    (b"###   @1='a\\nb'" + _VS, b"###   @1='a\\nb'" + _VS, False),  # a newline is not backslash-n
    (b"###   @2='a\\'\\n'" + _JS, b"###   @2='\"a'\\n\"'" + _JS, True),  # a JSON string document
    (b"###   @2='a\\'\\n'" + _JS, b"###   @2='\"a'\\t\"'" + _JS, False),
    (b"###   @2=[1.10000e+00,-3.00000e-01] /* VECTOR(2)" + _V2, b"###   @2=[1.1,-0.3] /* VECTOR" + _V2, True),
    (
        b"###   @2=[1.10000e+00,-3.00000e-01] /* VECTOR(2)" + _V2,
        b"###   @2=[1.1,-0.4] /* VECTOR" + _V2,
        False,
    ),
    (b"###   @2=[1.10000e+00] /* VECTOR(2)" + _V2, b"###   @2=[1.1] /* VECTOR" + _V2, False),
    (
        b"###   @2=" + _PARTIAL,
        b"###   @2=JSON_REPLACE(JSON_REPLACE(@2, '$[1]', \"d'x\"), '$[2]', 99)" + _JS,
        True,
    ),
    (
        b"###   @2=" + _PARTIAL,
        b"###   @2=JSON_REPLACE(JSON_REPLACE(@2, '$[1]', \"d'x\"), '$[2]', 99.0)" + _JS,
        False,
    ),
    (
        b"###   @2=" + _PARTIAL,
        b"###   @2=JSON_REPLACE(JSON_REPLACE(@2, '$[2]', 99), '$[1]', \"d'x\")" + _JS,
        False,
    ),
    (
        b"###   @2=" + _PARTIAL,
        b"###   @2=JSON_INSERT(JSON_REPLACE(@2, '$[1]', \"d'x\"), '$[2]', 99)" + _JS,
        False,
    ),
    (
        b"###   @3=-1 (255) /* TINYINT meta=0 nullable=1 is_null=0 */",
        b"###   @3=255 /* TINYINT UNSIGNED meta=0 nullable=1 is_null=0 */",
        True,
    ),
    (
        b"###   @3=-1 (255) /* TINYINT meta=0 nullable=1 is_null=0 */",
        b"###   @3=254 /* TINYINT UNSIGNED meta=0 nullable=1 is_null=0 */",
        False,
    ),
]


@pytest.mark.parametrize(("theirs", "mine", "agree"), NORMALISED)
def test_the_normaliser_undoes_its_dialect_and_nothing_else(theirs: bytes, mine: bytes, agree: bool) -> None:
    assert (normalise_mysql(theirs, mine) is None) == agree


@needs_mysqlbinlog
@pytest.mark.parametrize("record", RECORDS, ids=[r["path"] for r in RECORDS])
def test_row_lines_match_mysqlbinlog(corpus: Path, record: dict) -> None:
    path = corpus / record["path"]
    theirs, error = mysqlbinlog(path)
    mine = ours(path)
    if not row_lines(theirs):
        if record["path"] in THEY_CANNOT:
            why, says = THEY_CANNOT[record["path"]]
            assert says in error, f"{why}: expected mysqlbinlog to say {says!r}, it said {error!r}"
            assert row_lines(mine), f"we must print the rows mysqlbinlog cannot ({why})"
        else:
            assert not row_lines(mine), f"mysqlbinlog prints no rows (its last word: {error!r}), we do"
        return
    assert record["path"] not in THEY_CANNOT, (
        "mysqlbinlog learned to print this file: take it out of THEY_CANNOT"
    )
    result = compare_mysql(theirs, mine)
    assert not result.bad, result.bad[:3]
    assert result.compared, "no row line compared"
    if result.partitions:  # the partition of each event, which our text dump leaves out
        assert our_partitions(path) == result.partitions


@needs_mysqlbinlog
def test_they_cover_what_mariadb_binlog_cannot(corpus: Path) -> None:
    """The files mariadb-binlog cannot print (zstd payloads, binary JSON, VECTOR, tagged GTIDs) are
    compared here, every one with rows."""
    for name in MARIADB_BINLOG_CANNOT:
        theirs, error = mysqlbinlog(corpus / name)
        result = compare_mysql(theirs, ours(corpus / name))
        assert result.compared and not result.bad, (name, error, result.bad[:3])


@needs_mysqlbinlog
def test_live_workload_matches_mysqlbinlog(mysql: Any) -> None:
    """Every MySQL 9 column type with edge values, FULL and MINIMAL images, partial JSON updates, a
    compressed transaction and partitions (rows moving between them), logged by a private server.
    GEOMETRY, which mysqlbinlog cannot print, is in a file of its own: mariadb-binlog's there."""
    mysql.execute("DROP DATABASE IF EXISTS mtypes")
    before = mysql.flush_binlogs()
    run_workload(mysql)
    files = mysql.flush_binlogs()[len(before) - 1 : -1]
    compared = unprintable = 0
    partitions = []
    printed = b""
    for f in files:
        theirs, error = mysqlbinlog(f)
        assert not error, error
        result = compare_mysql(theirs, ours(f))
        assert not result.bad, result.bad[:3]
        assert our_partitions(f) == result.partitions
        compared, unprintable = compared + result.compared, unprintable + result.unprintable
        partitions += result.partitions
        printed += theirs
    assert compared > 700 and unprintable  # GEOMETRY: mysqlbinlog cannot print it
    assert partitions == [(None, 0), (None, 1), (None, 2), (0, 1), (1, 1), (None, 2), (1, 0)]
    for feature in (b"Transaction_Payload", b"JSON_REPLACE(", b"JSON_INSERT(", b"JSON_REMOVE(", b"VECTOR(3)"):
        assert feature in printed, f"the workload did not exercise {feature!r}"
    if shutil.which("mariadb-binlog"):
        geometry = row_lines(
            run(["mariadb-binlog", "-vv", "--base64-output=decode-rows", str(files[-1])]).stdout
        )
        mine = row_lines(ours(files[-1]))
        assert len(mine) == len(geometry) and sum(b"/* GEOMETRY " in line for line in mine) >= 8
        assert not [(t, o) for t, o in zip(geometry, mine, strict=True) if normalise(t, o)]


@needs_mysqlbinlog
def test_json_doubles_are_written_as_mysql_writes_them(mysql: Any) -> None:
    """MySQL's JSON text of a double (``my_gcvt``): ``double_text`` on doubles of every magnitude."""
    rng = random.Random(7)
    values = [
        sign * float(f"{m}e{k}")
        for k in range(-325, 309)
        for m in ("1", "1.5", "1.2345678901234567", "9.999999999999999", "4.9", str(rng.uniform(1, 10)))
        for sign in (1, -1)
    ]
    values = [v for v in values if v and abs(v) != float("inf")] + [0.0, -0.0, 0.1 + 0.2]
    conn = mysql.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CAST(%s AS JSON)", (json.dumps(values),))
            theirs = cur.fetchone()[0][1:-1].split(", ")
    finally:
        conn.close()
    assert [double_text(v) for v in values] == theirs
