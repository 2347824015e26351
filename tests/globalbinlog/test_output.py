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


def test_find_position_by_tso(merged, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """`find-position --tso` on the written global binlog: the first transaction at or after a TSO
    (a TSO unit's own, one between two units, before all, after all, a whole vtso), the GTIDs
    executed before it, and reading from there gives exactly the rest."""
    from binlake.cli import main
    from binlake.globalbinlog.output import GLOBAL_UUID
    from binlake.globalbinlog.position import find_by_tso
    from binlake.globalbinlog.vtso import parse

    _, out, files = merged
    series = BinlogSeries.open(*files)
    txns = [(seq, t) for seq, t in _series_transactions(series)]
    marks = [_mark_of(t) for _, t in txns]
    tsos = [parse(m)[0] for m in marks]
    picks = [0, 1, len(txns) // 2, len(txns) - 1]
    picks += [i for i, (_, t) in enumerate(txns) if t.source != txns[i - 1][1].source][:2]  # a file's first
    cases = [(str(tsos[i]), next(j for j, v in enumerate(tsos) if v >= tsos[i])) for i in picks]
    cases += [(str(tsos[i] - 1), next(j for j, v in enumerate(tsos) if v >= tsos[i] - 1)) for i in picks]
    cases += [(marks[i], i) for i in picks]  # a whole vtso: that very transaction
    cases += [("1", 0), (str(tsos[-1] + 1), len(txns))]
    for target, want in cases:
        found, vtso = find_by_tso(series, target)
        if want == len(txns):
            assert found.transaction is None and vtso is None
            assert found.position.offset == files[-1].stat().st_size
            continue
        seq, t = txns[want]
        assert (found.position.file, found.position.offset, vtso) == (str(files[seq]), t.start, marks[want])
        assert str(found.executed) == (
            f"{GLOBAL_UUID}:1-{want}" if want > 1 else f"{GLOBAL_UUID}:1" if want else ""
        )
        rest = [_mark_of(r) for _, r in _series_transactions(series, found.position)]
        assert rest == marks[want:], target
    assert main(["find-position", "--tso", str(tsos[5]), *map(str, files)]) == 0
    text = capsys.readouterr().out
    assert f"position: {txns[5][1].start}" in text and f"vtso {marks[5]}" in text
    assert f"executed before: {GLOBAL_UUID}:1-5" in text


def _series_transactions(series: BinlogSeries, start=None):  # type: ignore[no-untyped-def]
    from binlake.txn import TransactionGrouper

    g = TransactionGrouper(keep_events=True)
    for seq, ev in series.events(start=start):
        for t in g.feed(seq, ev):
            if t.kind != UNFINISHED:
                yield seq, t


def _mark_of(t) -> str:  # type: ignore[no-untyped-def]
    (mark,) = [e.body.query for e in t.events if isinstance(e.body, RowsQuery)]
    return str(mark).removeprefix(CTS_MARK)


def test_a_series_is_continued_only_with_its_server_uuid(  # type: ignore[no-untyped-def]
    merged, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`merge --server-uuid`: continuing a global binlog under another UUID would mix two GTID
    sources in one series (a replica resuming by GTID would skip or repeat): refused with one line
    naming both, the series untouched; with its own UUID the rerun goes on (writes nothing new)."""
    from binlake.cli import main

    res, _, _ = merged
    out = tmp_path / "global"
    first, other = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4f22ab58-82db-22f2-af44-d91bb0530673"
    args = ["merge", "--final", *(a for files in res.node_files for a in ("--node", str(files[0].parent)))]
    assert main([*args, "-o", str(out), "--server-uuid", first]) == 0
    written = _snapshot_dir(out)
    capsys.readouterr()
    assert main([*args, "-o", str(out), "--server-uuid", other]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and first in err and other in err, err
    assert "server UUID it was written with" in err
    assert _snapshot_dir(out) == written
    assert main([*args, "-o", str(out), "--server-uuid", first]) == 0
    assert _snapshot_dir(out) == written


def _snapshot_dir(directory: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(directory.iterdir())}
