"""Issue #17's "Done when": random clusters merged by the real command, checked on the WRITTEN global
binlog read back with binlake's own reader — TSO order, every branch of a transaction in one
transaction and each once, no rolled-back rows, a consistent bank total at every transaction
boundary, a rerun on grown inputs equal to one run, a restart after a cut byte-identical."""

from __future__ import annotations

import itertools
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.cli import main
from binlake.events.control import RowsQuery
from binlake.events.rows import Rows
from binlake.globalbinlog.output import CTS_MARK, GLOBAL_UUID
from binlake.globalbinlog.vtso import TSO_NODE, parse
from binlake.series import BinlogSeries
from binlake.shardsim import SimResult, SimTxn, simulate
from binlake.txn import UNFINISHED, iter_transactions

MAX_FILE = "6000"
TSO_KINDS = ("GLOBAL_TSO", "SINGLE_DN_TSO")
Unit = frozenset[tuple[int, int, int]]  # a written transaction: its (account, before, after) rows


def merge(nodes: list[Path], out: Path, final: bool = True) -> None:
    args = [a for d in nodes for a in ("--node", str(d))]
    assert (
        main(["merge", *(["--final"] if final else []), "--max-file-size", MAX_FILE, *args, "-o", str(out)])
        == 0
    )


def written(directory: Path) -> list[tuple[str, Unit]]:
    """The global binlog read back: (vtso mark, rows) per transaction, in file order."""
    out = []
    for i, t in enumerate(iter_transactions(BinlogSeries.open(directory / "binlog.index").events()), 1):
        assert t.kind != UNFINISHED and t.gtid == f"{GLOBAL_UUID}:{i}"  # consumers resume by GTID
        (mark,) = [e.body.query for e in t.events if isinstance(e.body, RowsQuery)]
        rows = [(b[0], b[1], a[1]) for e in t.events if isinstance(e.body, Rows) for b, a in e.body.rows]
        assert len(rows) == len(set(rows))
        out.append((mark.removeprefix(CTS_MARK), frozenset(rows)))
    return out


def expected(res: SimResult) -> dict[Unit, SimTxn]:
    """What must come out once each: a TSO transaction whole (all its branches in one), a
    transaction without TSO one unit per branch; heartbeats are not data; nothing rolled back."""
    want: dict[Unit, SimTxn] = {}
    for t in res.committed():
        if t.kind == "HEARTBEAT":
            continue
        parts = (
            [[c for b in t.branches for c in b.changes]]
            if t.kind in TSO_KINDS
            else [b.changes for b in t.branches]
        )
        for rows in parts:
            unit = frozenset(rows)
            assert unit not in want  # a balance moves on with every change: units are distinct
            want[unit] = t
    return want


def check(res: SimResult, out: list[tuple[str, Unit]]) -> None:
    want = expected(res)
    got = Counter(rows for _, rows in out)
    assert got == Counter(list(want)), "not each committed unit exactly once"  # also: no rolled-back rows
    vtsos = [v for v, _ in out]
    assert all(a < b for a, b in itertools.pairwise(vtsos))
    tso_units = []
    for v, rows in out:  # TSO units carry their transaction's commit TSO and id, in CTS order
        cts, txn_id, seq, node = parse(v)
        t = want[rows]
        if t.kind in TSO_KINDS:
            assert (cts, txn_id, seq, node) == (t.cts, t.txid, 0, TSO_NODE)
            tso_units.append(cts)
    assert tso_units == sorted({t.txid: t.cts for t in want.values() if t.kind in TSO_KINDS}.values())  # type: ignore[type-var]
    # replay: before-images match; the bank total holds wherever no split unit is half in
    balance = {a: 1000 for t in res.transactions for b in t.branches for a, _, _ in b.changes if a}
    total = sum(balance.values())
    left = {t.txid: len(t.branches) for t in want.values() if t.kind not in TSO_KINDS}
    half: set[int] = set()
    boundaries = 0
    for _, rows in out:
        for acct, before, after in sorted(rows):
            assert balance[acct] == before
            balance[acct] = after
        t = want[rows]
        if t.txid in left:
            left[t.txid] -= 1
            (half.add if left[t.txid] else half.discard)(t.txid)
        if not half:
            assert sum(balance.values()) == total
            boundaries += 1
    assert not half and boundaries


def grow(res: SimResult, live: list[Path], rng: random.Random) -> None:
    """Each node's files up to a random point: whole files, then part of the next (being written)."""
    for d, files in zip(live, res.node_files, strict=True):
        d.mkdir(parents=True, exist_ok=True)
        k = rng.randrange(len(files))
        for f in files[:k]:
            shutil.copy(f, d / f.name)
        data = files[k].read_bytes()
        (d / files[k].name).write_bytes(data[: rng.randrange(len(data) + 1)])


def copy_all(res: SimResult, live: list[Path]) -> None:
    for d, files in zip(live, res.node_files, strict=True):
        for f in files:
            shutil.copy(f, d / f.name)


def cut(directory: Path, rng: random.Random) -> None:
    """A crash: the output ends at a random byte (later files never written, the index naming the
    files up to the cut one)."""
    files = sorted(directory.glob("binlog.0*"))
    at = rng.randrange(sum(f.stat().st_size for f in files))
    for i, f in enumerate(files):
        size = f.stat().st_size
        if at < size:
            f.write_bytes(f.read_bytes()[:at])
            for later in files[i + 1 :]:
                later.unlink()
            (directory / "binlog.index").write_text("".join(f"./{g.name}\n" for g in files[: i + 1]))
            return
        at -= size


def snapshot(directory: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(directory.iterdir())}


@given(
    seed=st.integers(0, 10_000),
    nodes=st.integers(2, 5),
    carrier=st.sampled_from(["sequence80", "gcn105", "qstatus200"]),
    heartbeat_every=st.sampled_from([0, 7, 25]),
    weights=st.fixed_dictionaries(
        {
            k: st.floats(0.1, 5)
            for k in (
                "GLOBAL_TSO",
                "SINGLE_DN_TSO",
                "LOCAL",
                "NO_TSO_XA",
                "ONE_PHASE",
                "ROLLBACK",
                "PARTIAL_PREPARE_ROLLBACK",
            )
        }
    ),
    idle=st.booleans(),
    rng_seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_written_global_binlog_of_random_clusters(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    nodes: int,
    carrier: str,
    heartbeat_every: int,
    weights: dict[str, float],
    idle: bool,
    rng_seed: int,
) -> None:
    tmp = tmp_path_factory.mktemp("cluster")
    rng = random.Random(rng_seed)
    res = simulate(
        tmp / "sim", seed=seed, nodes=nodes, carrier=carrier, heartbeat_every=heartbeat_every,
        weights=weights, transactions=50, pending_at_end=0, max_file_size=4_000,
        idle_nodes=(nodes - 1,) if idle else (),
    )  # fmt: skip
    merge([files[0].parent for files in res.node_files], tmp / "once")
    out = written(tmp / "once")
    check(res, out)
    # a rerun on grown inputs: a merge of what the nodes had written at some point (not final: a
    # node may write more), then of everything, then --final, is the one run, byte for byte
    live = [tmp / "live" / f"dn{i}" for i in range(nodes)]
    grow(res, live, rng)
    merge(live, tmp / "grown", final=False)
    early = written(tmp / "grown") if (tmp / "grown" / "binlog.index").exists() else []
    assert early == out[: len(early)]
    copy_all(res, live)
    merge(live, tmp / "grown", final=False)
    merge(live, tmp / "grown")
    assert snapshot(tmp / "grown") == snapshot(tmp / "once")
    # a restart after the output was cut at any byte writes the bytes of one run
    cut(tmp / "grown", rng)
    merge(live, tmp / "grown")
    assert snapshot(tmp / "grown") == snapshot(tmp / "once")
