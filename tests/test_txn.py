"""Transaction boundaries on every real binlog: one transaction per GTID event, every non-control
event in exactly one transaction, order keys strictly increasing, commits where the index says."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.errors import BinlogError
from binlake.events.rows import Rows
from binlake.series import BinlogSeries
from binlake.statements import XaId
from binlake.txn import CONTROL_EVENTS, GTID_EVENTS, UNFINISHED, TransactionGrouper
from tests.conftest import corpus_index

RECORDS = [r for r in corpus_index()["records"] if r.get("events")]


@pytest.mark.parametrize("rec", RECORDS, ids=[r["path"] for r in RECORDS])
def test_boundaries(corpus: Path, rec: dict) -> None:
    g = TransactionGrouper(keep_events=True)
    txns, seen = [], []
    try:
        for seq, ev in BinlogSeries.open(corpus / rec["path"]).events(
            verify_checksum=False, require_fde=False
        ):
            seen.append(ev)
            txns += g.feed(seq, ev)
    except BinlogError:
        pass
    txns += g.finish()
    members = [id(e) for t in txns for e in t.events]
    assert len(members) == len(set(members)), "an event sits in two transactions"
    in_txn = {e for t in txns for e in map(id, t.events)}
    for ev in seen:
        assert (id(ev) in in_txn) == (ev.type_code not in CONTROL_EVENTS), (ev.offset, ev.type_name)
    gtid_events = [e for e in seen if e.type_code in GTID_EVENTS]
    per_txn = [sum(e.type_code in GTID_EVENTS for e in t.events) for t in txns]
    assert all(n <= 1 for n in per_txn) and sum(per_txn) == len(gtid_events)
    keys = [t.order_key for t in txns]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    for a, b in zip(txns, txns[1:], strict=False):
        assert a.start < a.end <= b.start
    assert (
        all(t.kind != UNFINISHED for t in txns[:-1]) or "orphan" in rec["path"] or "recovery" in rec["path"]
    )
    for t in txns:
        assert t.rows == sum(len(e.body.rows) for e in t.events if isinstance(e.body, Rows))


def test_kinds_and_metadata(corpus: Path) -> None:
    s = BinlogSeries.open(
        corpus / "mysql-server-8.0.39/std_data/binlog_recovery/duplicate_xid_xa_commit.000001"
    )
    g = TransactionGrouper()
    txns = [t for seq, ev in s.events(verify_checksum=False) for t in g.feed(seq, ev)]
    assert [t.kind for t in txns] == ["commit", "xa_prepare", "xa_commit", "xa_commit"]
    assert txns[1].xa_id == txns[2].xa_id == XaId(1, b"x", b"")
    assert str(txns[1].xa_id) == "X'78',X'',1"  # as the XA statements print it
    assert txns[0].commit_time_exact and txns[0].commit_ts_us and txns[0].sequence_number == 1


def test_series_links_and_order(corpus: Path, tmp_path: Path) -> None:
    a = corpus / "mysql-server-8.0.39/std_data/replicated-bin.000001"
    b = corpus / "mysql-server-8.0.39/std_data/replicated-bin.000002"
    s = BinlogSeries.open(a, b)
    g = TransactionGrouper()
    txns = [t for seq, ev in s.events() for t in g.feed(seq, ev)]
    assert [t.gtid.rsplit(":", 1)[1] for t in txns] == [str(i) for i in range(1, 10)]
    assert {t.file_seq for t in txns} == {0, 1}
    from binlake.series import SeriesError

    with pytest.raises(SeriesError, match="out of order"):
        list(BinlogSeries.open(b, a).events())
    (tmp_path / "bin.index").write_text(f"{a}\n{tmp_path / 'replicated-bin.000009'}\n")
    with pytest.raises(SeriesError, match="missing"):
        BinlogSeries.open(tmp_path / "bin.index")
    c = tmp_path / "other-bin.000003"
    c.write_bytes(b.read_bytes())
    with pytest.raises(SeriesError, match="rotates to replicated-bin.000002"):
        list(BinlogSeries.open(a, c).events())


def test_compressed_transaction_is_one_transaction(corpus: Path) -> None:
    s = BinlogSeries.open(corpus / "osheroff-mysql-binlog-connector-java/mysql-bin.compressed")
    g = TransactionGrouper()
    txns = [t for seq, ev in s.events() for t in g.feed(seq, ev)]
    assert len(txns) == 1
    t = txns[0]
    assert t.kind == "commit" and t.rows == 1 and len(t.tables) == 1
    assert [e.type_name for e in t.events] == [
        "ANONYMOUS_GTID",
        "TRANSACTION_PAYLOAD",
        "QUERY",
        "TABLE_MAP",
        "UPDATE_ROWS_V2",
        "XID",
    ]
    assert t.end == t.events[1].end_offset  # ends where the payload ends, not at the inner XID's offset
