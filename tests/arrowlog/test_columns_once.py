"""A change log read trimmed as a sync reads it (``arrowlog.changelog.Trim``: ``columns=first``,
``before=keyless``): the same rows as the plain read, a row change's ``columns`` only on the read's
first row of its layout, every row the number of the layout it has — the same number in every
process — and a keyed change without its ``before`` image. Compiled and pure builders, corpus files
and a generated series with DDL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from binlake.arrowlog.changelog import (
    CHANGELOG_SCHEMA,
    ColumnsOnce,
    Trim,
    columns_value,
    layout_id,
    transaction_batches,
)
from binlake.changes import ROW_OPS
from binlake.errors import BinlogError
from binlake.generate import generate
from binlake.layout import Column
from binlake.spark.changelog import file_transactions
from tests.conftest import CORPUS, corpus_index

ROWS = {o.value for o in ROW_OPS}


def corpus_files() -> list[Path]:
    """The corpus files with row events (none without the corpus: the test is skipped)."""
    records = [r for r in corpus_index()["records"] if "path" in r and not r.get("problems")]
    rows = [r for r in records if any("ROWS" in k for k in r.get("hist", {}))]
    return [CORPUS / r["path"] for r in rows]


def read(path: Path, compiled: bool, trim: Trim | None) -> pa.Table:
    try:
        batches = list(transaction_batches(file_transactions(path), compiled=compiled, trim=trim))
    except BinlogError:
        pytest.skip(f"{path.name}: not readable whole")
    return pa.Table.from_batches(batches, CHANGELOG_SCHEMA if trim is None else trim.schema)


def check_once(path: Path, compiled: bool) -> int:
    """The trimmed reads of ``path`` against the plain one; the number of row changes."""
    plain = read(path, compiled, None)
    once = read(path, compiled, Trim(ColumnsOnce()))
    assert once.drop_columns(["columns", "layout"]).equals(plain.drop_columns(["columns"]))
    slim = read(path, compiled, Trim(ColumnsOnce(), keyed_before=False))
    assert slim.drop_columns(["before"]).equals(once.drop_columns(["before"]))
    keyed = [k is not None for k in plain.column("pk").to_pylist()]
    befores = plain.column("before").to_pylist()
    assert slim.column("before").to_pylist() == [
        None if k else b for k, b in zip(keyed, befores, strict=True)
    ]
    assert not compiled or read(path, False, Trim(keyed_before=False)).equals(
        read(path, True, Trim(keyed_before=False))
    )
    sent: set[int] = set()
    ops, numbers = once.column("op").to_pylist(), once.column("layout").to_pylist()
    full, carried = plain.column("columns").to_pylist(), once.column("columns").to_pylist()
    for op, number, columns, got in zip(ops, numbers, full, carried, strict=True):
        if columns is None:  # a rename or drop: no layout
            assert number is None and got is None
            continue
        assert number == layout_id(tuple(Column(**{**c, "values": _tuple(c["values"])}) for c in columns))
        if op not in ROWS or number not in sent:
            assert got == columns
        else:
            assert got is None
        if op in ROWS:
            sent.add(number)
    return sum(op in ROWS for op in ops)


def _tuple(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "pure"])
def test_generated_series_with_ddl(tmp_path: Path, compiled: bool) -> None:
    pytest.importorskip("binlake.arrowlog._fastvariant", reason="the compiled change log is not built")
    generate(tmp_path, seed=5, target_bytes=300_000, max_file_size=None, ddl_every=20)
    (path,) = sorted(tmp_path.glob("binlog.0*"))
    assert check_once(path, compiled) > 1000


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "pure"])
@pytest.mark.parametrize("path", corpus_files() or [None], ids=lambda p: p.name if p else "no corpus")
def test_corpus(path: Path | None, compiled: bool) -> None:
    if path is None:
        pytest.skip(f"real binlog corpus not found at {CORPUS}")
    if compiled:
        pytest.importorskip("binlake.arrowlog._fastvariant", reason="the compiled change log is not built")
    check_once(path, compiled)


def test_a_layouts_number_is_the_same_in_another_process() -> None:
    layout = (Column("id", 3, 0, True, 63, True, None), Column("s", 247, 1, False, 45, False, ("a", "b")))
    code = (
        "from binlake.layout import Column; from binlake.arrowlog.changelog import layout_id; "
        "print(layout_id((Column('id', 3, 0, True, 63, True, None), "
        "Column('s', 247, 1, False, 45, False, ('a', 'b')))))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(other.stdout) == layout_id(layout)
    assert layout_id(layout[:1]) != layout_id(layout)
    assert columns_value(layout)[1]["values"] == ["a", "b"]
