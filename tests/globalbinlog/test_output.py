"""The merged stream written as a global binlog series: binlake and mariadb-binlog read it back."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from binlake.events.control import RowsQuery
from binlake.events.rows import Rows
from binlake.globalbinlog.merge import merge_nodes
from binlake.globalbinlog.output import CTS_MARK, write_binlog, write_jsonl
from binlake.globalbinlog.sorter import HEARTBEAT
from binlake.reader import BinlogReader
from binlake.series import BinlogSeries
from binlake.shardsim import simulate
from binlake.txn import UNFINISHED, iter_transactions


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("global")
    res = simulate(root / "nodes", seed=11, transactions=300, nodes=4, pending_at_end=0)
    out, _ = merge_nodes(res.node_files)
    files = write_binlog(out, root / "global", max_file_size=40_000)
    return res, out, files


def test_the_global_binlog_reads_back_as_the_merged_stream(merged) -> None:  # type: ignore[no-untyped-def]
    res, out, files = merged
    assert len(files) >= 3
    data = [g for g in out if g.kind != HEARTBEAT and g.events]
    txns = [t for t in iter_transactions(BinlogSeries.open(*files).events()) if t.kind != UNFINISHED]
    assert len(txns) == len(data)
    marks = []
    balance = {a: res_balance for a, res_balance in _initial(res).items()}
    total = sum(balance.values())
    for t, g in zip(txns, data, strict=True):
        (mark,) = [
            e.body.query
            for e in t.events
            if isinstance(e.body, RowsQuery) and e.body.query.startswith(CTS_MARK)
        ]
        marks.append(mark.removeprefix(CTS_MARK))
        rows = [r for e in t.events if isinstance(e.body, Rows) for r in e.body.rows]
        assert rows == [r for p in g.pieces for rr in p.rows for r in rr.rows]
        for before, after in rows:
            assert balance[before[0]] == before[1]
            balance[after[0]] = after[1]
    assert marks == [g.vtso for g in data] and all(a < b for a, b in itertools.pairwise(marks))
    assert sum(balance.values()) == total  # every transfer whole, in the right order
    # rotation only between transactions; every file but the last ends with ROTATE
    for f in files:
        assert all(t.kind != UNFINISHED for t in iter_transactions((0, e) for e in BinlogReader(f)))
    assert [list(BinlogReader(f))[-1].type_name for f in files] == ["ROTATE"] * (len(files) - 1) + ["STOP"]


def _initial(res) -> dict[int, int]:  # type: ignore[no-untyped-def]
    return {a: 1000 for t in res.transactions for b in t.branches for a, _, _ in b.changes if a}


@pytest.mark.skipif(
    shutil.which("mariadb-binlog") is None,
    reason="mariadb-binlog is not installed (apt-get install mariadb-client)",
)
def test_mariadb_binlog_reads_the_global_binlog(merged) -> None:  # type: ignore[no-untyped-def]
    _, out, files = merged
    run = subprocess.run(
        ["mariadb-binlog", "-vv", *map(str, files)], capture_output=True, text=True, check=True
    )
    updates = run.stdout.count("### UPDATE `db`.`acct`")
    assert updates == sum(len(r.rows) for g in out if g.kind != HEARTBEAT for p in g.pieces for r in p.rows)
    # MariaDB does not print MySQL's Rows_query text, but skips it as the ignorable event it is
    ignorable = run.stdout.count("# Ignorable event type 29 (MySQL Rows_query)")
    assert ignorable == sum(1 for g in out if g.kind != HEARTBEAT and g.events)


def test_output_is_deterministic(merged, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res, out, files = merged
    again, _ = merge_nodes(res.node_files)
    files2 = write_binlog(again, tmp_path / "g2", max_file_size=40_000)
    assert [f.read_bytes() for f in files2] == [f.read_bytes() for f in files]
    assert write_jsonl(out, tmp_path / "a.jsonl") == len(out)
    write_jsonl(again, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


@pytest.mark.parametrize("cut", [0.3, 0.71])
def test_a_crashed_writer_continues_from_its_last_complete_transaction(
    merged, tmp_path: Path, cut: float
) -> None:  # type: ignore[no-untyped-def]
    """The output dies inside a transaction (its last file cut anywhere); the rerun cuts back to the
    last complete transaction and writes the rest where an uninterrupted run would: every transaction
    once, in order, the very bytes of one run (kills at any byte: test_crash.py)."""
    res, out, files = merged
    target = tmp_path / "g"
    write_binlog(out, target, max_file_size=40_000)
    written = sorted(target.glob("binlog.0*"))
    keep = written[: max(1, int(len(written) * cut))]
    for f in written[len(keep) :]:
        f.unlink()
    (target / "binlog.index").write_text("".join(f"./{f.name}\n" for f in keep))
    last = keep[-1]
    last.write_bytes(last.read_bytes()[: int(last.stat().st_size * 0.6)])  # mid-transaction
    again = write_binlog(out, target, max_file_size=40_000)
    txns = [t for t in iter_transactions(BinlogSeries.open(*again).events()) if t.kind != UNFINISHED]
    marks = [
        m.body.query.removeprefix(CTS_MARK) for t in txns for m in t.events if isinstance(m.body, RowsQuery)
    ]
    assert marks == [g.vtso for g in out if g.kind != HEARTBEAT and g.events]  # none lost, none twice
    assert [list(BinlogReader(f))[-1].type_name for f in again] == ["ROTATE"] * (len(again) - 1) + ["STOP"]
    assert [f.read_bytes() for f in again] == [f.read_bytes() for f in files]
