"""Partial JSON edits applied over a FULL before image give the document MySQL itself holds after
the statement: each statement below updates its own row of a real MySQL (binlog_row_image=FULL,
binlog_row_value_options=PARTIAL_JSON), and the change's after image, as text, must equal the row
MySQL returns — key order, array positions, ``last``, clamped indexes, quoted keys, nested calls."""

from __future__ import annotations

from typing import Any

import pytest

from binlake.changes import row_changes
from binlake.events.rows import PartialJson
from binlake.events.types import EventType
from binlake.reader import BinlogReader
from binlake.spark.changelog import file_transactions
from binlake.values.json_binary import Json
from binlake.values.json_edits import apply_edits, parse_path
from tests.support.written import written

PAD = "x" * 300  # the document long enough that MySQL logs edits, not the document
DOC = '{"a": 1, "o": {"x": 1, "yy": [1]}, "arr": [1, 2, 3], "pad": "' + PAD + '"}'
EDITS = [
    "JSON_SET(doc, '$.a', 2)",
    "JSON_SET(doc, '$.new', 5)",
    "JSON_SET(doc, '$.b', 5, '$.zzzzz', 6, '$.cc', 7)",
    "JSON_SET(doc, '$.arr[10]', 9)",
    "JSON_SET(doc, '$.arr[last]', 7)",
    "JSON_SET(doc, '$.arr[last-1]', 0)",
    "JSON_REMOVE(doc, '$.arr[0]')",
    "JSON_REMOVE(doc, '$.arr[last]')",
    "JSON_REMOVE(doc, '$.o.x')",
    "JSON_REPLACE(doc, '$.o', JSON_OBJECT('k', 'v', 'a', JSON_ARRAY(1, 2)))",
    'JSON_SET(doc, \'$."key with space"\', 1, \'$."é"\', 2, \'$."q\\\\"t"\', 3)',
    "JSON_SET(doc, '$.arr[1]', JSON_ARRAY(1, 2), '$.o.yy[0]', 'y')",
    "JSON_SET(JSON_REMOVE(doc, '$.a'), '$.z', 1)",
    "JSON_SET(doc, '$.a[1]', 5)",  # a scalar wrapped in an array: logged as a REPLACE of $.a
    "JSON_SET(doc, '$.o.yy[5]', 1.5, '$.o.n', NULL, '$.o.t', TRUE)",
    "JSON_REMOVE(doc, '$.o.yy[0]', '$.o')",
]


@pytest.fixture(scope="module")
def edited(mysql: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Any], dict[int, str]]:
    """The row changes of the statements, and the document MySQL holds in each row after them."""
    rows = ", ".join(f"({i}, '{DOC}')" for i in range(len(EDITS)))
    (f,) = written(
        mysql,
        [
            "DROP DATABASE IF EXISTS pje",
            "CREATE DATABASE pje",
            "CREATE TABLE pje.t (id INT PRIMARY KEY, doc JSON)",
            f"INSERT INTO pje.t VALUES {rows}",
        ],
        [
            "SET SESSION binlog_row_image = 'FULL'",
            "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
            *(f"UPDATE pje.t SET doc = {e} WHERE id = {i}" for i, e in enumerate(EDITS)),
        ],
        tmp_path_factory.mktemp("pje") / "bin",
    ).iterdir()
    partial = [
        type(a[1]) is PartialJson
        for e in BinlogReader(f)
        if e.kind == EventType.PARTIAL_UPDATE_ROWS
        for _, a in e.body.rows
    ]
    assert partial.count(True) == len(EDITS)  # every statement logged as edits
    conn = mysql.connect("pje")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, doc FROM t")
            want = dict(cur.fetchall())
    finally:
        conn.close()
    return [c for t in file_transactions(f) for c in row_changes(t)], want


@pytest.mark.parametrize("i", range(len(EDITS)), ids=EDITS)
def test_an_edited_document_equals_mysqls(edited: tuple[list[Any], dict[int, str]], i: int) -> None:
    changes, want = edited
    (change,) = [c for c in changes if c.key == (i,)]
    after = change.after[1]
    assert isinstance(after, Json) and after.text() == want[i]


def test_an_edit_mysql_would_reject_leaves_the_edits() -> None:
    doc = Json({"a": 1, "arr": [1]})
    for edit in [
        ("REPLACE", "$.nope", 1),  # REPLACE needs the path
        ("INSERT", "$.a", 1),  # INSERT of a key present
        ("REMOVE", "$.arr[3]", None),  # out of bounds
        ("INSERT", "$.nope.x", 1),  # no parent
        ("REPLACE", "$", 1),  # the root
        ("REPLACE", "$.a[0]", 1),  # no auto-wrap in a diff
        ("REPLACE", "$.*", 1),  # a wildcard is no path the server writes
        ("REPLACE", "$.arr[0 to 1]", 1),
    ]:
        assert apply_edits(doc, [edit]) is None, edit
    assert doc == Json({"a": 1, "arr": [1]})  # the before document is not changed


def test_paths() -> None:
    assert parse_path('$.a."b c"[3][last][last-2]') == [
        "a",
        "b c",
        ("cell", 3, False),
        ("cell", 0, True),
        ("cell", 2, True),
    ]
    assert parse_path('$."q\\"t"') == ['q"t']
    for bad in ["a", "$.", "$[", "$[x]", "$.a b", '$."open', "$**", "$[last-]"]:
        assert parse_path(bad) is None, bad
