"""``binlake changes``: one JSON line per row change, in a stable envelope, with the decoder's values
(real binlogs and generated all-types series), hostile names escaped, and ``--follow`` on a
directory that grows and rotates while it is read."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from binlake.changes import ROW_OPS, row_changes
from binlake.events.control import Xid
from binlake.events.gtid import Gtid
from binlake.events.query import Query
from binlake.events.rows import ABSENT, Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.generate import generate
from binlake.render.changes import FIELDS, SOURCE_FIELDS, TRANSACTION_FIELDS
from binlake.render.values import json_value
from binlake.txn import UNFINISHED, TransactionGrouper
from binlake.values.columns import ColumnDef
from binlake.values.types import ColumnType
from binlake.writer import BinlogWriter
from tests.conftest import CORPUS, corpus_index
from tests.render.pinned import run_cli

SRC = str(Path(__file__).resolve().parents[2] / "src")


def changes(*argv: str) -> list[dict[str, Any]]:
    status, out = run_cli(["changes", *argv])
    assert status == 0, out[-500:]
    return [json.loads(line) for line in out.decode("utf-8", "surrogateescape").split("\n")[:-1]]


def expected(files: list[str]) -> list[dict[str, Any]]:
    """What the lines must hold, from the core model and json_value directly (not the formatter)."""
    from binlake.cli.common import SchemaOptions
    from binlake.reader import BinlogReader

    tracker = SchemaOptions().tracker()
    grouper = TransactionGrouper()
    out = []
    for seq, f in enumerate(files):
        for ev in BinlogReader(f, observers=[tracker]):
            for t in grouper.feed(seq, ev):
                if t.kind == UNFINISHED:
                    continue
                for rc in row_changes(t):
                    if rc.op not in ROW_OPS:
                        continue
                    image = {
                        img: None if v is None else {
                            c.name: json_value(x, c) for c, x in zip(rc.layout, v, strict=True) if x is not ABSENT
                        }
                        for img, v in (("before", rc.before), ("after", rc.after))
                    }  # fmt: skip
                    out.append(
                        {"type": rc.op.value, "database": rc.db, "table": rc.table, **image,
                         "pos": rc.position, "gtid": t.gtid, "order_key": rc.order_key.encode().hex()}
                    )  # fmt: skip
    return json.loads(json.dumps(out))  # through JSON as the lines are (tuples as lists)


def assert_values_equal(files: list[str]) -> int:
    got, want = changes(*files), expected(files)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert list(g) == list(FIELDS)
        assert list(g["source"]) == list(SOURCE_FIELDS) and list(g["transaction"]) == list(TRANSACTION_FIELDS)
        assert g["op"] == {"insert": "c", "update": "u", "delete": "d"}[g["type"]]
        assert (g["type"], g["database"], g["table"], g["before"], g["after"]) == (
            w["type"], w["database"], w["table"], w["before"], w["after"],
        )  # fmt: skip
        assert (g["source"]["pos"], g["source"]["gtid"], g["order_key"]) == (
            w["pos"],
            w["gtid"],
            w["order_key"],
        )
    return len(got)


def test_corpus_values_are_the_decoders(corpus: Path) -> None:
    records = [
        r for r in corpus_index()["records"] if "ROWS" in " ".join(r.get("hist", {})) and not r["problems"]
    ]
    compared = 0
    for r in records:
        status, _ = run_cli(["changes", str(CORPUS / r["path"])])
        if status == 0:  # damaged files end with their own error (tests/test_corpus.py)
            compared += assert_values_equal([str(CORPUS / r["path"])])
    assert compared > 2_000


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb"])
def test_generated_values_are_the_decoders(tmp_path: Path, flavor: str) -> None:
    result = generate(tmp_path, flavor=flavor, target_bytes=600_000, max_file_size=250_000)
    assert assert_values_equal([str(f) for f in result.files]) > 1_000


def test_envelope_is_stable(tmp_path: Path) -> None:
    """The first change of a deterministic generated series, every field: a change of the envelope
    is a change for every consumer, so it must be made here on purpose."""
    result = generate(tmp_path, flavor="mysql80", target_bytes=100_000, max_file_size=None)
    first = changes(str(result.files[0]))[0]
    assert first == {
        "op": "c",
        "type": "insert",
        "database": "shop",
        "table": "customers",
        "key": {"id": 769},
        "before": None,
        "after": {
            "id": 769, "name": "back\\slash alpha 😀", "balance": "2525519212.05", "joined": "1998-06-24",
            "tier": None, "tags": None, "updated": "2029-12-20 04:28:29.984",
        },
        "source": {
            "file": "binlog.000001", "pos": 1800, "row": 0, "server_id": 1,
            "gtid": "cd613e30-d8f1-6adf-91b7-584a2265b1f5:5", "ts_ms": 1700000000500, "ts_us": 1700000000500611,
        },
        "transaction": {"id": "cd613e30-d8f1-6adf-91b7-584a2265b1f5:5", "pos": 1498, "order": 0},
        "order_key": "000000000000000100000000000005da00000000000000000000000000030000000001",
    }  # fmt: skip


def test_directory_selection_and_transaction_order(tmp_path: Path) -> None:
    result = generate(tmp_path / "s", flavor="mysql80", target_bytes=300_000, max_file_size=100_000)
    every = changes(str(tmp_path / "s"))
    assert every == changes(*[str(f) for f in result.files])
    assert [c["order_key"] for c in every] == sorted(c["order_key"] for c in every)
    by_txn: dict[str, list[int]] = {}
    for c in every:
        by_txn.setdefault(c["transaction"]["id"], []).append(c["transaction"]["order"])
    assert all(orders == list(range(len(orders))) for orders in by_txn.values())
    deletes = changes(str(tmp_path / "s"), "--type", "delete", "--table", "orders")
    assert deletes and all(c["op"] == "d" and c["table"] == "orders" and c["after"] is None for c in deletes)
    assert len(deletes) == sum(1 for c in every if c["op"] == "d" and c["table"] == "orders")


HOSTILE_DB = 'd"b\\\n'
HOSTILE_TABLE = 't"}, "op": "d", "x": {"\\\u2028\x01`'
HOSTILE_COLUMN = 'k"\\\t'


def write_hostile(directory: Path) -> list[Path]:
    cols = [
        ColumnDef(0, ColumnType.LONG, 0, False, name=HOSTILE_COLUMN, unsigned=False),
        ColumnDef(1, ColumnType.VARCHAR, 80, True, name='v"', collation=45),
    ]
    tm = TableMap(7, 1, HOSTILE_DB, HOSTILE_TABLE, cols, primary_key=[0], has_optional_metadata=True)
    cols[0].in_primary_key = True
    rows = Rows("insert", 2, 7, 1, 2, 3, 3, table=tm)
    rows.rows = [(None, [1, 'x", "y": "z\n\\'])]
    with BinlogWriter(directory, flavor="mysql80") as w:
        w.transaction(
            [
                (EventType.GTID, Gtid(0, "3e11fa47-71ca-11e1-9e33-c80aa9429562", 1, last_committed=0, sequence_number=1), 100),
                (EventType.QUERY, Query(1, 0, 0, HOSTILE_DB, "BEGIN", {"flags2": 0, "sql_mode": 0}), 100),
                (EventType.TABLE_MAP, tm, 100),
                (EventType.WRITE_ROWS_V2, rows, 100),
                (EventType.XID, Xid(9), 100),
            ]
        )  # fmt: skip
        return w.files


def test_hostile_names_are_escaped(tmp_path: Path) -> None:
    files = write_hostile(tmp_path)
    status, out = run_cli(["changes", *map(str, files)])
    assert status == 0
    lines = out.decode().splitlines()  # the way many readers split lines: U+2028 must not cut one
    assert len(lines) == 1 and "\u2028" not in lines[0]
    (c,) = [json.loads(line) for line in lines]
    assert (c["database"], c["table"], c["op"]) == (HOSTILE_DB, HOSTILE_TABLE, "c")
    assert c["key"] == {HOSTILE_COLUMN: 1}
    assert c["after"] == {HOSTILE_COLUMN: 1, 'v"': 'x", "y": "z\n\\'}
    assert list(c) == list(FIELDS)


def copy_growing(src: bytes, dst: Path, cut: int) -> None:
    with open(dst, "ab") as f:
        f.write(src[:cut])


def test_follow_a_growing_directory(tmp_path: Path) -> None:
    """A series copied into a directory in pieces (events cut in the middle, then a rotation) while
    ``changes --follow`` reads it: in the end, exactly the lines of a batch run, once each."""
    result = generate(tmp_path / "src", flavor="mysql80", target_bytes=400_000, max_file_size=200_000)
    files = [f for f in result.files]
    assert len(files) >= 2
    live = tmp_path / "live"
    live.mkdir()
    out = open(tmp_path / "out.jsonl", "wb")  # noqa: SIM115
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(
        [sys.executable, "-m", "binlake.cli", "changes", "--follow", "--poll", "0.05", str(live)],
        stdout=out, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        for f in files:
            data = f.read_bytes()
            pieces = [0, 5, 1000, len(data) // 3 + 7, len(data) // 2 + 3, len(data)]
            for a, b in zip(pieces, pieces[1:], strict=False):
                with open(live / f.name, "ab") as g:
                    g.write(data[a:b])
                time.sleep(0.3)
        want = changes(str(tmp_path / "src"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = (tmp_path / "out.jsonl").read_bytes().count(b"\n")
            if got >= len(want):
                break
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        out.close()
    assert proc.returncode == 0, err.decode()[-2000:]
    got_lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().split("\n")[:-1]]
    assert got_lines == want
    shutil.rmtree(live)


def test_type_ddl_is_refused_not_an_empty_stream(corpus: Path, capsys: Any) -> None:
    """``changes`` prints row changes only: ``--type ddl`` (offered by the shared selection options)
    printed nothing and exited 0, as if the binlog held no DDL."""
    from binlake.cli import main

    f = str(corpus / "zalora-binlog-parser/gtid-fixtures/mysql-bin.01")  # 13 DDL transactions
    assert main(["changes", "--type", "ddl", f]) == 2
    assert "dump --type ddl" in capsys.readouterr().err
    assert main(["changes", "--type", "update", f]) == 0
    assert capsys.readouterr().out.count('"op": "u"') == 2
