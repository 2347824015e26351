"""Decoded values against the expected outputs kept beside the corpus: mysql-test ``.result`` files,
real ``mysqlbinlog`` dumps and another parser's expected JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from binlake.events.rows import Rows
from binlake.reader import BinlogReader
from binlake.render.jsonl import event_dict
from binlake.render.text import render_text, rows_lines


def _json_objects(text: str) -> list[dict[str, Any]]:
    dec, out, i = json.JSONDecoder(), [], 0
    while m := re.compile(r"\S").search(text, i):
        obj, i = dec.raw_decode(text, m.start())
        out.append(obj)
    return out


ZALORA = [
    ("fixtures/01.json", "fixtures/mysql-bin.01"),
    ("fixtures/02.json", "fixtures/mysql-bin.02"),
    ("fixtures/03.json", "fixtures/mysql-bin.03"),
    ("fixtures/05.json", "fixtures/mysql-bin.05"),
    ("fixtures/06.json", "fixtures/mysql-bin.06"),
    ("fixtures/07.json", "fixtures/mysql-bin.07"),
    ("gtid-fixtures/01.json", "gtid-fixtures/mysql-bin.01"),
]


def _values(row: dict[str, Any] | None) -> list[str]:
    return sorted(json.dumps(v) for v in (row or {}).values())


@pytest.mark.parametrize(("expected", "binlog"), ZALORA)
def test_zalora_expected_json(corpus: Path, expected: str, binlog: str) -> None:
    """Their parser's output names columns from the schema; ours (5.6/5.7 files, no metadata) by
    position: compare operation, table and each row's values."""
    base = corpus / "zalora-binlog-parser"
    want = [
        (
            o["Type"].lower(),
            o["Header"]["Schema"],
            o["Header"]["Table"],
            _values((o.get("OldData") or o.get("Data") or {}).get("Row")) if o["Type"] != "Insert" else None,
            _values((o.get("NewData") or o.get("Data") or {}).get("Row")) if o["Type"] != "Delete" else None,
        )
        for o in _json_objects((base / expected).read_text())
        if o["Type"] in ("Insert", "Update", "Delete")
    ]
    got = []
    for ev in BinlogReader(base / binlog):
        if isinstance(ev.body, Rows):
            d = event_dict(ev)["body"]
            op = {"insert": "insert", "update": "update", "delete": "delete"}[d["operation"]]
            for r in d["rows"]:
                got.append(
                    (
                        op,
                        d["database"],
                        d["table"],
                        _values(r["before"]) if r["before"] is not None else None,
                        _values(r["after"]) if r["after"] is not None else None,
                    )
                )
    assert got == want


@pytest.mark.parametrize("n", ["01", "02", "03", "05", "06", "07"])
def test_zalora_plaintext_mysqlbinlog(corpus: Path, n: str) -> None:
    """A real mysqlbinlog 5.6 ``-vv`` dump: every row line and every event position, end_log_pos,
    CRC and summary equal ours (their timestamps are in the author's zone, so only those differ)."""
    base = corpus / "zalora-binlog-parser" / "fixtures"
    text = (base / f"plaintext-mysql-bin.{n}").read_text()
    theirs_rows = [line for line in text.splitlines() if line.startswith("###")]
    ours = list(render_text(BinlogReader(base / f"mysql-bin.{n}"), positional=True))
    assert [line for line in ours if line.startswith("###")] == theirs_rows
    header = re.compile(
        r"^#\d{6} [ \d]\d:\d\d:\d\d (server id .*?)\t(Table_map|Write_rows|Update_rows|Delete_rows|Xid|Rotate).*"
    )
    theirs_heads = [
        m.group(0).split(" server id ", 1)[1] for line in text.splitlines() if (m := header.match(line))
    ]
    ours_heads = [line.split(" server id ", 1)[1] for line in ours if header.match(line)]
    assert ours_heads == theirs_heads
    assert [line for line in ours if line.startswith("# at ")] == [
        line for line in text.splitlines() if line.startswith("# at ")
    ]


def test_mysql_test_row_verbose_result(corpus: Path) -> None:
    """mysql-test's binlog_row_mysqlbinlog_verbose: ``mysqlbinlog -v`` of four NDB binlogs."""
    result = (
        corpus / "mysql-server-8.0.39/companions/suite/binlog/r/binlog_row_mysqlbinlog_verbose.result"
    ).read_text()
    blocks = re.findall(
        r"Verbose statements from : (\S+)\n.*?\nstmt\n(.*?)drop table raw_binlog_rows;", result, re.S
    )
    assert len(blocks) == 4
    for name, body in blocks:
        expected = [line for line in body.splitlines() if line.startswith("###")]
        events = BinlogReader(corpus / "mysql-server-8.0.39/suite/binlog/std_data" / name)
        ours = [
            line
            for ev in events
            if isinstance(ev.body, Rows)
            for line in rows_lines(ev.body, 1, positional=True)
        ]
        assert ours == expected, name


def test_yelp_statements_equal_generating_sql(corpus: Path) -> None:
    """A statement-format 5.0 binlog: its QUERY events are the generating SQL up to the first FLUSH
    LOGS (the file holds the first log), BEGIN/COMMIT around each autocommitted INSERT."""
    base = corpus / "yelp-ybinlogp"
    text = (base / "gen_test_data.sql").read_text().split("FLUSH LOGS;")[0]
    sql = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    statements = [s.strip() for s in sql.split(";") if s.strip() and not s.strip().startswith("USE")]
    queries = [
        ev.body.query for ev in BinlogReader(base / "mysql-bin.default-path") if ev.type_name == "QUERY"
    ]
    assert [q for q in queries if q not in ("BEGIN", "COMMIT")] == statements
