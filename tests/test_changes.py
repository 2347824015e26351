"""The core change model: order keys whose bytes sort as they do, and the row changes of every
corpus file — one per row of every decoded rows event, in order, with the rows' own values."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pytest

from binlake.changes import KEY_WIDTH, NAME_OPS, SCHEMA_OPS, Op, OrderKey, RowChange, file_number, row_changes
from binlake.errors import BinlogError
from binlake.events.rows import ABSENT, Rows
from binlake.globalbinlog import vtso
from binlake.reader import BinlogReader
from binlake.txn import DDL, UNFINISHED, Transaction, TransactionGrouper
from tests.conftest import corpus_index

RECORDS = [r for r in corpus_index()["records"] if r.get("events")]


def _random_key(rnd: random.Random) -> OrderKey:
    small = [0, 1, 255, 256, 2**31, 2**32 - 1]
    big = [*small, 2**40, 2**63, 2**64 - 1]

    def pick(values: list[int], top: int) -> int:
        return rnd.choice(values) if rnd.random() < 0.5 else rnd.randrange(top)

    node = rnd.choice([bytes(6), b"000001", b"000002", b"00000a", b"zzzzzz"])
    return OrderKey(
        pick(big, 2**64), pick(big, 2**64), pick(small, 2**32), node, pick(small, 2**32), pick(small, 2**32),
        rnd.choice([0, 1]),
    )  # fmt: skip


def test_order_key_bytes_sort_as_the_keys_do() -> None:
    rnd = random.Random(14)
    keys = [_random_key(rnd) for _ in range(5000)]
    keys += [k._replace(part=1 - k.part) for k in keys[:500]]  # neighbours differing in the last field only
    encoded = [k.encode() for k in keys]
    assert {len(e) for e in encoded} == {KEY_WIDTH}
    assert sorted(keys) == sorted(keys, key=OrderKey.encode)
    assert [OrderKey.decode(e) for e in encoded] == keys


def test_a_tombstone_sorts_after_the_change_before_and_before_its_own_row() -> None:
    previous, change = OrderKey(3, 900, event=2, row=4), OrderKey(3, 900, event=2, row=5)
    assert previous < change.tombstone() < change
    assert previous.encode() < change.tombstone().encode() < change.encode()


@pytest.mark.parametrize(
    "key", [OrderKey(-1, 0), OrderKey(2**64, 0), OrderKey(0, 0, seq=2**32), OrderKey(0, 0, node=b"1234567")]
)
def test_an_order_key_out_of_range_is_refused(key: OrderKey) -> None:
    with pytest.raises(ValueError, match="order key out of range"):
        key.encode()


def test_global_keys_sort_as_their_virtual_tsos() -> None:
    rnd = random.Random(2)
    vtsos = [
        vtso.make(
            rnd.randrange(10**18), rnd.randrange(10**18), rnd.randrange(10**9), f"{rnd.randrange(1, 40):06d}"
        )
        for _ in range(2000)
    ]
    vtsos += [
        vtso.make(5, 7, 0, vtso.TSO_NODE),
        vtso.make(5, 7, 1, "000003"),
        vtso.make(5, 8, 0, vtso.TSO_NODE),
    ]
    by_key = sorted(vtsos, key=lambda v: OrderKey.of_vtso(*vtso.parse(v)).encode())
    assert by_key == sorted(vtsos)


def test_file_number() -> None:
    assert file_number("/x/mysql-bin.000042") == 42
    assert file_number("update-full-row.binlog") == 0


def _transactions(path: Path) -> list[Transaction]:
    g = TransactionGrouper()
    out: list[Transaction] = []
    try:
        for ev in BinlogReader(path):
            out.extend(t for t in g.feed(file_number(path), ev) if t.kind != UNFINISHED)
    except BinlogError:
        pass  # damaged or encrypted corpus files: what came before the damage
    return out


def _expected_rows(t: Transaction) -> list[tuple[str, list | None, list | None]]:
    return [
        (ev.body.operation, before, after)
        for ev in t.events
        if isinstance(ev.body, Rows) and ev.body.table is not None and not ev.body.undecoded_reason
        for before, after in ev.body.rows
    ]


@pytest.mark.parametrize("rec", RECORDS, ids=[r["path"] for r in RECORDS])
def test_row_changes_of_every_corpus_file(corpus: Path, rec: dict) -> None:
    path = corpus / rec["path"]
    last: OrderKey | None = None
    for t in _transactions(path):
        changes = list(row_changes(t, source="s"))
        rows = [c for c in changes if c.op not in SCHEMA_OPS]
        assert [(c.op.value, c.before, c.after) for c in rows] == [
            (op, tuple(b) if b is not None else None, tuple(a) if a is not None else None)
            for op, b, a in _expected_rows(t)
        ]
        for c in changes:
            assert c.order_key > (last or c.order_key.tombstone()), "order keys go up"
            assert c.order_key.encode() > (last.encode() if last else b"")
            last = c.order_key
            assert (c.origin.source, c.origin.txn_position, c.origin.gtid) == ("s", t.start, t.gtid)
            assert (c.order_key.major, c.order_key.minor) == (file_number(path), t.start)
            assert c.file == path.name
            if c.op in NAME_OPS:
                assert t.kind == DDL and c.layout is None and c.key is None
            elif c.op is Op.ADD_COLUMN:  # the new column and the rows' value (or no value: unknown)
                assert t.kind == DDL and c.layout is not None and len(c.layout) == 1 and c.key is None
                assert c.after is not None and len(c.after) == 1 and c.before is None
            else:
                _check_row(c)


def _check_row(c: RowChange) -> None:
    assert c.layout is not None
    image = c.after if c.after is not None else c.before
    assert image is not None and len(image) == len(c.layout)
    keyed = [i for i, col in enumerate(c.layout) if col.pk]
    if not keyed:
        assert c.key is None
        return
    source = c.after if c.after is not None and all(c.after[i] is not ABSENT for i in keyed) else c.before
    assert source is not None
    assert c.key == tuple(source[i] for i in keyed)
    if c.op is Op.UPDATE:
        assert c.before is not None and c.key_before == tuple(c.before[i] for i in keyed)
    else:
        assert c.key_before is None


def test_layout_carries_names_types_keys_and_enum_values(corpus: Path) -> None:
    path = corpus / "blackbeam-rust_mysql_common/mysql-enum-string-set.000001"
    changes = [c for t in _transactions(path) for c in row_changes(t)]
    layout = changes[0].layout
    assert layout is not None and all(c.layout is layout for c in changes)  # one layout object per table map
    assert any(col.values for col in layout)
    assert [col.name for col in layout] == [col.label for col in _first_table(path).columns]


def _first_table(path: Path):  # type: ignore[no-untyped-def]
    for ev in BinlogReader(path):
        if isinstance(ev.body, Rows) and ev.body.table is not None:
            return ev.body.table
    raise AssertionError("no rows event")


def test_renames_and_drops_are_name_changes_and_a_selection_keeps_either_name(corpus: Path) -> None:
    from binlake.filters import Selection

    path = corpus / "mysql-server-8.0.39/std_data/rpl_cross_version_default_utf8mb4_collation.000001"
    changes = [c for t in _transactions(path) for c in row_changes(t)]
    ops = {c.op for c in changes}
    assert {Op.RENAME_COLUMN, Op.DROP_TABLE} <= ops
    renamed = next(c for c in changes if c.op is Op.RENAME_COLUMN)
    assert renamed.before is not None and renamed.after is not None
    assert len(renamed.before) == len(renamed.after) == 1 and renamed.before != renamed.after
    dropped = next(c for c in changes if c.op is Op.DROP_TABLE)
    assert dropped.before == (dropped.db, dropped.table) and dropped.after is None
    other = Selection(tables=["no_such_table"])
    kept = [c for t in _transactions(path) if other.keeps_transaction(t) for c in row_changes(t, other)]
    assert kept == []


def test_a_key_declared_out_of_column_order_is_in_column_order(mariadb: Any) -> None:
    """PRIMARY KEY (b, a): the table map lists [1, 0]; ``key`` pairs with the layout's pk columns."""
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS keyorder",
        "CREATE OR REPLACE TABLE keyorder.t (a DATE, b VARCHAR(5), v INT, PRIMARY KEY (b, a))",
        "INSERT INTO keyorder.t VALUES ('2024-01-01', 'x', 1)",
        "UPDATE keyorder.t SET b = 'y'",
    )
    found = []
    for f in mariadb.flush_binlogs():
        for t in _transactions(f):
            found += [c for c in row_changes(t) if c.db == "keyorder"]
    assert [(c.op, c.key, c.key_before) for c in found] == [
        (Op.INSERT, (dt.date(2024, 1, 1), "x"), None),
        (Op.UPDATE, (dt.date(2024, 1, 1), "y"), (dt.date(2024, 1, 1), "x")),
    ]
    for c in found:
        _check_row(c)


def test_row_changes_of_rows_read_undecoded(tmp_path: Path) -> None:
    """Transactions read with row decoding off (rows kept as bytes) give the same row changes: each
    event's rows are decoded where the changes need them; a damaged one raises the decoder's error."""
    from binlake.errors import MalformedEventError
    from binlake.generate import generate

    f = generate(tmp_path / "bin", seed=21, target_bytes=80_000, ddl_every=12).files[0]

    def changes(decode_rows: bool) -> list[RowChange]:
        g = TransactionGrouper()
        events = BinlogReader(f, decode_rows=decode_rows)
        return [c for ev in events for t in g.feed(1, ev) if t.kind != UNFINISHED for c in row_changes(t)]

    want = changes(True)
    assert len(want) > 200 and changes(False) == want
    g = TransactionGrouper()
    t = next(
        t
        for ev in BinlogReader(f, decode_rows=False)
        for t in g.feed(1, ev)
        if t.kind == "commit" and any(isinstance(e.body, Rows) for e in t.events)
    )
    for e in t.events:
        if isinstance(e.body, Rows):
            e.body.raw_rows = e.body.raw_rows[:-1]
    with pytest.raises(MalformedEventError) as err:
        list(row_changes(t))
    assert err.value.source == str(f) and err.value.offset is not None
