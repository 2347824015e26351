"""The per-layout SQL statements equal the per-value reference (``render.sql``'s ``_insert``,
``_update``, ``_delete``), statement for statement, redo and flashback, on every rows event of the
corpus and of generated all-types series (MySQL 8 with full metadata, MariaDB)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from binlake.dialects.mysql import quote_str
from binlake.errors import BinlogError
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.render import sql
from binlake.render.sqlrow import RowSqlCache, quote
from tests.conftest import CORPUS, corpus_index

GENERATED = RowSqlCache(sql._named_row_sql)


def rows_bodies(path: Path) -> Iterator[Rows]:
    try:
        for ev in BinlogReader(path):
            if isinstance(ev.body, Rows) and ev.body.table is not None and not ev.body.undecoded_reason:
                yield ev.body
    except BinlogError:
        return  # damaged or encrypted files end with their own error (tests/test_corpus.py)


def named(tm: TableMap) -> TableMap:
    """Maps without column names (MINIMAL metadata, MySQL 5.x) get ``c1``…: SQL needs names, and
    their values are worth comparing too."""
    if all(c.name is not None for c in tm.columns):
        return tm
    return tm.replaced(columns=[dataclasses.replace(c, name=c.name or f"c{c.index + 1}") for c in tm.columns])


def assert_same(bodies: Iterator[Rows]) -> int:
    compared = 0
    for b in bodies:
        tm = named(b.table)  # type: ignore[arg-type]
        fns = GENERATED.get(tm)
        for before, after in b.rows:
            if b.operation == "insert":
                assert fns.insert(after) == sql._insert(tm, after)
                assert fns.delete(after) == sql._delete(tm, after)
            elif b.operation == "delete":
                assert fns.delete(before) == sql._delete(tm, before)
                assert fns.insert(before) == sql._insert(tm, before)
            else:
                assert fns.update(before, after) == sql._update(tm, before, after)
                assert fns.update(after, before) == sql._update(tm, after, before)
            compared += 1
    return compared


def test_corpus_rows_as_the_reference(corpus: Path) -> None:
    records = [r for r in corpus_index()["records"] if r.get("events")]
    compared = sum(assert_same(rows_bodies(CORPUS / r["path"])) for r in records)
    assert compared > 10_000


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb"])
def test_generated_all_types_as_the_reference(tmp_path: Path, flavor: str) -> None:
    result = generate(tmp_path, flavor=flavor, target_bytes=1_500_000, max_file_size=None)
    compared = sum(assert_same(rows_bodies(f)) for f in result.files)
    assert compared > 1_000


@pytest.mark.parametrize(
    "text", ["", "plain", "it's", "back\\slash", "nul\0", "lines\r\n", "ctrl-z \x1a", "é 😀 \udcff"]
)
def test_quote_equals_quote_str(text: str) -> None:
    assert quote(text) == quote_str(text)


@pytest.mark.parametrize("flashback", [False, True])
def test_blocks_write_the_lines(tmp_path: Path, flashback: bool) -> None:
    """``sql`` writes a transaction's lines as one item: the same text as ``render_sql``'s lines,
    redo and flashback, and up to the same transaction when one cannot be written."""
    from binlake.schema import SchemaHistory, SchemaTracker
    from binlake.txn import iter_transactions

    result = generate(tmp_path, flavor="mysql80", target_bytes=400_000, max_file_size=None)
    tracker = SchemaTracker(SchemaHistory(), on_mismatch="positional")
    events = [(seq, ev) for seq, f in enumerate(result.files) for ev in BinlogReader(f, observers=[tracker])]
    txns = list(iter_transactions(events))
    want = "".join(line + "\n" for line in sql.render_sql(txns, flashback=flashback))
    assert "".join(item + "\n" for item in sql.render_sql_blocks(txns, flashback=flashback)) == want
    assert want.count("BEGIN;") > 300
    # a transaction whose rows cannot be written (no column names): both stop before it (redo) or
    # write nothing (flashback, which writes newest first after reading all)
    broken = dataclasses.replace(txns[-3])
    broken.events = [dataclasses.replace(e) for e in broken.events]
    for e in broken.events:
        if isinstance(e.body, Rows) and e.body.table is not None:
            tm = e.body.table
            e.body = dataclasses.replace(
                e.body, table=tm.replaced(columns=[dataclasses.replace(c, name=None) for c in tm.columns])
            )
    odd = [*txns[:-3], broken, *txns[-2:]]

    def written(render: object) -> tuple[str, object]:
        out: list[str] = []
        try:
            for item in render(odd, flashback=flashback):  # type: ignore[operator]
                out.append(item + "\n")
        except Exception as e:  # noqa: BLE001
            return "".join(out), (type(e), str(e))
        return "".join(out), None

    assert written(sql.render_sql_blocks) == written(sql.render_sql)
    assert written(sql.render_sql)[1] is not None
