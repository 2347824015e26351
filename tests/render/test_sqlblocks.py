"""``sql``'s output written by C (``render._fastjoin.SqlBlocks`` through ``sql.render_sql_bytes``)
is the pure path's, byte for byte, redo and flashback, with the same error at the same place: what
``main`` wrote (``render_sql_blocks``' items, each encoded with its newline as ``write_lines`` does)
equals ``render_sql_bytes`` compiled and pure, on the corpus, generated MySQL 8 and MariaDB series,
hostile values of every column type inside transactions, JSON documents and SETs with escapes, and
odd transactions C must hand back (DDL, no column names, unencodable text, odd fields)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake import native
from binlake.errors import BinlogError
from binlake.events.base import Event, EventHeader
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.render import joined, sql
from binlake.schema import SchemaHistory, SchemaTracker
from binlake.txn import DDL, Transaction, iter_transactions
from binlake.values.columns import ColumnDef
from binlake.values.json_binary import Json, JsonUInt
from binlake.values.types import ColumnType
from tests.conftest import CORPUS, corpus_index
from tests.render.test_fastjoin import random_texts
from tests.render.test_fastrender import HOSTILE, NAMES
from tests.render.test_sqlrow import named
from tests.values.test_plan import CATALOGUE, _layout

pytestmark = pytest.mark.skipif(
    joined.FORMATTER.built is None,
    reason="the compiled formatter is not built (no C compiler or Cython at install: pure path only)",
)

Outcome = tuple[bytes, Any]


def _collect(items: Iterable[bytes | bytearray | str], encode: bool) -> Outcome:
    out = bytearray()
    try:
        for item in items:
            out += (item + "\n").encode("utf-8", "surrogateescape") if encode else item  # type: ignore[operator]
    except Exception as e:  # noqa: BLE001  (the same failure both ways is what is tested)
        return bytes(out), (type(e), str(e))
    return bytes(out), None


def on_path(compiled: bool, run: Callable[[], Outcome]) -> Outcome:
    native.use_compiled(compiled)
    try:
        return run()
    finally:
        native.use_compiled(not native.PURE_FORCED)


def main_output(txns: list[Transaction], flashback: bool) -> Outcome:
    """What ``sql`` wrote before: the pure blocks, each encoded with its newline."""
    return on_path(False, lambda: _collect(sql.render_sql_blocks(txns, flashback), True))


def bytes_output(txns: list[Transaction], flashback: bool, compiled: bool, batch: int = 1 << 20) -> Outcome:
    return on_path(compiled, lambda: _collect(sql.render_sql_bytes(txns, flashback, batch), False))


def assert_alike(txns: list[Transaction], batch: int = 1 << 20) -> bytes:
    for flashback in (False, True):
        want = main_output(txns, flashback)
        assert bytes_output(txns, flashback, False, batch) == want
        assert bytes_output(txns, flashback, True, batch) == want
    return want[0]


def transactions(files: Iterable[Path], name_columns: bool = False) -> list[Transaction]:
    """The transactions of the files (read up to a damaged file's error), their maps named
    ``c1``… where the binlog carries no names when ``name_columns``."""
    tracker = SchemaTracker(SchemaHistory(), on_mismatch="positional")

    def events() -> Iterator[tuple[int, Event]]:
        for seq, f in enumerate(files):
            try:
                for ev in BinlogReader(f, observers=[tracker]):
                    b = ev.body
                    if name_columns and isinstance(b, Rows) and b.table is not None:
                        ev = dataclasses.replace(ev, body=dataclasses.replace(b, table=named(b.table)))
                    yield seq, ev
            except BinlogError:
                return

    return list(iter_transactions(events()))


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb"])
def test_generated_series_write_alike(tmp_path: Path, flavor: str) -> None:
    result = generate(tmp_path, flavor=flavor, target_bytes=1_000_000, max_file_size=None)
    txns = transactions(result.files)
    text = assert_alike(txns)
    assert text.count(b"BEGIN;") > 300
    assert_alike(txns, batch=1000)  # small output blocks: the same bytes


def test_corpus_writes_alike() -> None:
    written = 0
    for r in corpus_index()["records"]:
        if r.get("events"):
            txns = transactions([CORPUS / r["path"]], name_columns=True)
            written += assert_alike(txns).count(b"\n")
            # the maps as read: no names is an error (the same one, after the same transactions)
            assert_alike(transactions([CORPUS / r["path"]]))
    assert written > 10_000


def _header() -> EventHeader:
    return EventHeader(timestamp=1700000000, type_code=30, server_id=1, event_size=100, log_pos=200, flags=0)


def _rows(tm: TableMap, operation: str, rows: list[Any], **kw: Any) -> Event:
    body = Rows(operation, 2, 1, 0, len(tm.columns), 0, 0, table=tm, rows=rows, **kw)
    return Event(_header(), body, "f", 4)


def _txn(events: list[Event], **kw: Any) -> Transaction:
    fields: dict[str, Any] = {"file_seq": 0, "source": "binlog.000001", "start": 4, "kind": "commit"}
    fields.update(kw)
    return Transaction(**fields, events=events)


def _all_ops(tm: TableMap, image: list[Any], other: list[Any]) -> list[Event]:
    return [
        _rows(tm, "insert", [(None, image)]),
        _rows(tm, "delete", [(image, None)]),
        _rows(tm, "update", [(image, other), (other, image)]),
    ]


def test_every_type_with_hostile_values_writes_alike() -> None:
    """Each catalogue type under a hostile name, with and without a key, fed the hostile values
    (an error or an unencodable value ends the output at its transaction, alike)."""
    txns: list[Transaction] = []
    for k in range(len(CATALOGUE)):
        (col,) = _layout([k])
        col.name = NAMES[k % len(NAMES)] or "c"
        for key in ([], [0]):
            tm = TableMap(1, 0, "d`b", "t\n'x", [col], primary_key=key)
            for value in HOSTILE:
                for image in ([value], (value,)):
                    txns.append(_txn(_all_ops(tm, image, [None]), gtid=f"g:{len(txns)}"))  # type: ignore[arg-type]
    compared = 0
    for t in txns:  # one at a time: the first error would end the output
        assert_alike([t])
        compared += 1
    assert compared > 5_000


def _doc_values(rng: random.Random, texts: list[str]) -> list[Any]:
    floats = [rng.uniform(-1e3, 1e3) for _ in range(50)]
    floats += [10.0**e * rng.random() for e in range(-20, 25)] + [
        1e15,
        9.99e15,
        1e16,
        1e-5,
        1e-4,
        123456789012345.6,
    ]
    floats += [float("nan"), float("inf"), -0.0, 0.0, 5e-324, 1.7976931348623157e308]
    docs: list[Any] = [None, True, False, 0, -1, 2**63, -(2**63) - 1, 10**30, JsonUInt(2**64 - 1), [], {}, ""]
    docs += floats + texts + [{t: [t, f]} for t, f in zip(texts, floats * 10, strict=False)]
    docs += [{1: "int key"}, ("a", "tuple"), {"k": ("t",)}, {"d": {"e": {"f": [1, [2, [3]]]}}}, b"x", 3 + 4j]
    deep: Any = 1
    for _ in range(80):
        deep = [deep]
    return [*docs, deep]


def test_json_documents_and_sets_with_escapes_write_alike() -> None:
    """JSON documents written by C into the output (plain ones: every value class of a document,
    floats MySQL writes otherwise than ``repr``, escapes of both JSON and SQL), and SETs."""
    rng = random.Random(18)
    texts = random_texts(3000)
    cols = [
        ColumnDef(0, ColumnType.LONG, 0, False, name="id"),
        ColumnDef(1, ColumnType.JSON, 4, True, name="j"),
        ColumnDef(2, ColumnType.SET, 0, True, name="s"),
    ]
    tm = TableMap(1, 0, "db", "t", cols, primary_key=[0])
    keyless = TableMap(1, 0, "db", "t", cols, primary_key=[])
    txns = []
    docs = _doc_values(rng, texts)
    sets: list[Any] = [(), ("a",), ("a", "b"), (texts[0], texts[1]), ("x", 1), [("l",)], "not a tuple", 5]
    sets += [tuple(rng.sample(texts, 3)) for _ in range(500)]
    for i, d in enumerate(docs):
        for doc in (Json(d, plain=True), Json(d)):
            s = sets[i % len(sets)]
            image = [i, doc, s]
            txns.append(_txn(_all_ops(tm if i % 2 else keyless, image, [i, Json("o", plain=True), ("a",)])))
    for s in sets:
        txns.append(_txn(_all_ops(tm, [1, Json(1, plain=True), s], [2, None, None])))
    written = 0
    for t in txns:
        written += len(assert_alike([t]))
    assert written > 1_000_000


def test_transactions_c_hands_back_write_alike(tmp_path: Path) -> None:
    """DDL, odd fields, bodies that are not rows or not decoded, an empty transaction, a failing
    one in the middle (redo: up to it; flashback: nothing after the header), an unencodable value."""
    result = generate(tmp_path, flavor="mysql80", target_bytes=200_000, max_file_size=None)
    txns = transactions(result.files)
    assert any(t.kind == DDL for t in txns)
    rows_txn = next(t for t in txns if t.kind != DDL and any(isinstance(e.body, Rows) for e in t.events))
    rows_ev = next(e for e in rows_txn.events if isinstance(e.body, Rows))
    tm = rows_ev.body.table
    nameless = tm.replaced(columns=[dataclasses.replace(c, name=None) for c in tm.columns])
    some = txns[:40]
    odd = [
        dataclasses.replace(rows_txn, gtid=None),
        dataclasses.replace(rows_txn, gtid=""),
        dataclasses.replace(rows_txn, gtid="é\udcff"),
        dataclasses.replace(rows_txn, gtid=7),  # type: ignore[arg-type]
        dataclasses.replace(rows_txn, source="dir/é'f"),
        dataclasses.replace(rows_txn, source=Path("p")),  # type: ignore[arg-type]
        dataclasses.replace(rows_txn, start=True),
        dataclasses.replace(rows_txn, start=2**70),
        dataclasses.replace(rows_txn, events=tuple(rows_txn.events)),  # type: ignore[arg-type]
        dataclasses.replace(rows_txn, events=[]),
        dataclasses.replace(rows_txn, kind="rollback"),
        dataclasses.replace(rows_txn, kind=DDL),
        dataclasses.replace(
            rows_txn, events=[Event(_header(), Query(1, 0, 0, "db", "BEGIN"), "f", 4), rows_ev]
        ),
        dataclasses.replace(
            rows_txn,
            events=[dataclasses.replace(rows_ev, body=dataclasses.replace(rows_ev.body, table=None))],
        ),
        dataclasses.replace(
            rows_txn,
            events=[
                dataclasses.replace(rows_ev, body=dataclasses.replace(rows_ev.body, undecoded_reason="x"))
            ],
        ),
        dataclasses.replace(
            rows_txn,
            events=[dataclasses.replace(rows_ev, body=dataclasses.replace(rows_ev.body, operation="write"))],
        ),
        dataclasses.replace(
            rows_txn,
            events=[dataclasses.replace(rows_ev, body=dataclasses.replace(rows_ev.body, rows=[(None,)]))],
        ),
        dataclasses.replace(
            rows_txn,
            events=[dataclasses.replace(rows_ev, body=dataclasses.replace(rows_ev.body, rows=iter([])))],
        ),
    ]
    for t in odd:
        assert_alike([*some, t, *some])
    unencodable = [("\ud800" if isinstance(v, str) else v) for v in rows_ev.body.rows[0][1]]
    broken = [
        dataclasses.replace(
            rows_txn,
            events=[dataclasses.replace(rows_ev, body=dataclasses.replace(rows_ev.body, table=nameless))],
        ),
        dataclasses.replace(
            rows_txn,
            events=[  # (an INSERT's undo names the key only: a DELETE's has it all)
                dataclasses.replace(
                    rows_ev,
                    body=dataclasses.replace(rows_ev.body, operation="insert", rows=[(None, unencodable)]),
                ),
                dataclasses.replace(
                    rows_ev,
                    body=dataclasses.replace(rows_ev.body, operation="delete", rows=[(unencodable, None)]),
                ),
            ],
        ),
    ]
    assert any(isinstance(v, str) for v in rows_ev.body.rows[0][1] or [])
    for t in broken:
        for flashback in (False, True):
            want = main_output([*some, t, *some], flashback)
            assert want[1] is not None, (broken.index(t), flashback)  # it fails
            assert bytes_output([*some, t, *some], flashback, True) == want
            assert bytes_output([*some, t, *some], flashback, False) == want


def test_blocks_are_written_in_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On an intact series no transaction but DDL goes to the pure block."""
    result = generate(tmp_path, flavor="mysql80", target_bytes=200_000, max_file_size=None)
    txns = transactions(result.files)
    pure = sql._pure_block
    seen: list[str] = []

    def counted(t: Transaction, flashback: bool) -> str | None:
        seen.append(t.kind)
        return pure(t, flashback)

    monkeypatch.setattr(sql, "_pure_block", counted)
    assert_alike(txns)
    assert seen and set(seen) == {DDL}
