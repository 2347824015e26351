"""A JSON column an update leaves as it was, which MySQL (binlog_row_value_options=PARTIAL_JSON) logs
as an empty edit list, is its value before in the change model (``changes.settled_rows``): the same
in ``row_changes`` and in the change log built from the rows' bytes. Written by a real MySQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from binlake import native
from binlake.changes import row_changes
from binlake.events.rows import ABSENT, PartialJson
from binlake.reader import BinlogReader
from binlake.spark.changelog import file_batches, file_transactions
from binlake.values import Json
from tests.support.written import written

DOC = '{"a": 1, "b": "' + "x" * 200 + '"}'


def _binlog(mysql: Any, tmp_path: Path, image: str) -> Path:
    db = f"settle_{image.lower()}"
    (f,) = written(
        mysql,
        [
            f"DROP DATABASE IF EXISTS {db}",
            f"CREATE DATABASE {db}",
            f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT, j JSON, k JSON)",
            f"INSERT INTO {db}.t VALUES (1, 1, '{DOC}', '[1, 2]')",
        ],
        [
            f"SET SESSION binlog_row_image = '{image}'",
            "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
            f"UPDATE {db}.t SET v = 2",  # j and k outside the SET
            f"UPDATE {db}.t SET v = 3, j = JSON_SET(j, '$.a', 1)",  # a no-op assignment
            f"UPDATE {db}.t SET j = JSON_SET(j, '$.c', 2)",  # an edit
        ],
        tmp_path / image,
    ).iterdir()
    return f


@pytest.mark.parametrize("image", ["FULL", "MINIMAL"])
def test_unchanged_json_columns_take_their_value_before(mysql: Any, tmp_path: Path, image: str) -> None:
    f = _binlog(mysql, tmp_path, image)
    raw = [r for e in BinlogReader(f) if getattr(e.body, "partial", False) for r in e.body.rows]
    assert [type(v) is PartialJson and not v.diffs for _, after in raw for v in after].count(True) >= 1
    changes = [c for t in file_transactions(f) for c in row_changes(t)]
    assert [c.after[1] for c in changes] == ([2, 3, 3] if image == "FULL" else [2, 3, ABSENT])
    for c in changes[:2]:
        if image == "FULL":  # the before image's documents
            assert c.after[2] == c.before[2] and c.after[3] == c.before[3]
            assert isinstance(c.after[2], Json) and isinstance(c.after[3], Json)
        else:  # left out, as MINIMAL leaves out what an update does not set
            assert c.after[2] is ABSENT and c.after[3] is ABSENT
    last = changes[2].after[2]  # an edit: applied over a whole document before, else kept
    if image == "FULL":
        assert isinstance(last, Json) and last.value == {**changes[2].before[2].value, "c": 2}
    else:
        assert type(last) is PartialJson and [d.path for d in last.diffs] == ["$.c"]
    # the change log from the rows' bytes (compiled) and from decoded changes (pure) agree
    made = []
    try:
        for on in (True, False):
            native.use_compiled(on)
            made.append(pa.Table.from_batches(list(file_batches(f))).select(["op", "after"]).to_pylist())
    finally:
        native.use_compiled(not native.PURE_FORCED)
    assert made[0] == made[1] and len(made[0]) == 3
