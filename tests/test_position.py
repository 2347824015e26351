"""Position search against brute force: from the position found for T, no transaction that
committed at or after T is missed, and none that committed well before T is included."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from binlake.errors import IncompleteTailError
from binlake.gtid import GtidSet, MariaGtidPos
from binlake.position import find_by_gtid_set, find_by_time
from binlake.series import BinlogSeries
from binlake.txn import Transaction, iter_transactions

REAL_SERIES = [
    [
        "mysql-server-8.0.39/std_data/replicated-bin.000001",
        "mysql-server-8.0.39/std_data/replicated-bin.000002",
    ],
    ["mysql-server-8.0.39/zip-extracted/upgrade/data_wl13352_8017/data_upgrade/binlog.000002"],
    ["blackbeam-rust_mysql_common/json.binlog.000001"],
    ["osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32"],  # 5.7: no commit timestamps
    ["zalora-binlog-parser/gtid-fixtures/mysql-bin.01"],
]


def all_transactions(series: BinlogSeries) -> list[Transaction]:
    return list(iter_transactions(series.events(), keep_events=False))


def probe_times(txns: list[Transaction]) -> list[int]:
    ts = {t.commit_time_us for t in txns}
    out = set()
    for x in ts:
        out |= {x - 1_000_001, x - 1, x, x + 1, x + 500_000}
    return sorted(out | {min(ts) - 10**7, max(ts) + 10**7})


def check(series: BinlogSeries, txns: list[Transaction], t_us: int, slack_us: int) -> None:
    found = find_by_time(series, t_us)
    pos = (found.position.file_seq, found.position.offset)
    for t in txns:
        if t.commit_time_us >= t_us + (0 if t.commit_time_exact else slack_us):
            assert t.order_key >= pos, (
                f"T={t_us}: {t.gtid} committed at {t.commit_time_us} starts before {pos}"
            )
        if t.order_key >= pos:
            assert t.latest_commit_us >= t_us - slack_us, (
                f"T={t_us}: {t.gtid} committed well before T but included"
            )
    if found.transaction is not None:
        assert found.transaction.order_key == pos


@pytest.mark.parametrize("names", REAL_SERIES, ids=lambda n: n[0])
def test_time_search_on_real_binlogs(corpus: Path, names: list[str]) -> None:
    series = BinlogSeries.open(*(corpus / n for n in names))
    txns = all_transactions(series)
    exact = all(t.commit_time_exact for t in txns)
    for t_us in probe_times(txns):
        check(series, txns, t_us, 0 if exact else 2_000_000)


@pytest.mark.slow
def test_time_search_on_a_live_server(mariadb: Any) -> None:
    """MariaDB writes no commit times: the client's clock around each COMMIT is the truth."""
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS tpos", "CREATE TABLE IF NOT EXISTS tpos.t (id INT PRIMARY KEY, v INT)"
    )
    files_before = len(mariadb.flush_binlogs())
    conn = mariadb.connect("tpos")
    windows = []
    with conn.cursor() as cur:
        for i in range(12):
            before = time.time_ns() // 1000
            cur.execute("INSERT INTO t VALUES (%s, %s)", (i, i))
            windows.append((before, time.time_ns() // 1000))
            time.sleep(0.35)
    conn.close()
    files = mariadb.flush_binlogs()[files_before - 1 : -1]
    series = BinlogSeries.open(*files)
    txns = [t for t in all_transactions(series) if t.tables == [] or ("tpos", "t") in t.tables]
    ours = [t for t in txns if t.rows]  # skip the checkpoint/DDL noise; the inserts, in order
    assert len(ours) == 12
    for before, after in windows:
        for t_us in (before - 1, before, after, after + 1, (before + after) // 2):
            found = find_by_time(series, t_us)
            pos = (found.position.file_seq, found.position.offset)
            for (b, a), t in zip(windows, ours, strict=True):
                if b >= t_us:
                    assert t.order_key >= pos  # committed at or after T: never missed
                if a < t_us - 2_000_000:
                    assert t.order_key < pos  # committed well before T: not included


def test_gtid_search(corpus: Path) -> None:
    names = REAL_SERIES[0]
    series = BinlogSeries.open(*(corpus / n for n in names))
    txns = all_transactions(series)
    sid = txns[0].gtid.split(":")[0]
    for n in range(0, 10):
        have = GtidSet.parse(f"{sid}:1-{n}") if n else GtidSet()
        found = find_by_gtid_set(series, have)
        later = [t for t in txns if t.order_key >= (found.position.file_seq, found.position.offset)]
        assert [t.gtid for t in later] == [t.gtid for t in txns if t.gtid not in have]
        assert found.executed == have


def test_mariadb_gtid_search(corpus: Path) -> None:
    series = BinlogSeries.open(corpus / "mariadb-server-10.3/std_data/rpl/master-bin-seq_10.3.36.000001")
    txns = all_transactions(series)
    found = find_by_gtid_set(series, MariaGtidPos.parse("0-1-100"))
    assert found.transaction is not None and found.transaction.gtid == "0-1-101"
    assert str(found.executed) == "0-1-100"
    assert [t.gtid for t in txns].index("0-1-101") == [t.order_key for t in txns].index(
        found.transaction.order_key
    )


def test_gtid_search_names_what_the_series_lacks(corpus: Path) -> None:
    """A set without GTIDs that ran before the series' first file (purged) has no position that
    brings a replica up to date: the search says which GTIDs are missing instead of answering as if
    it had found one (MySQL's server refuses such a replica, ER_MASTER_HAS_PURGED_REQUIRED_GTIDS)."""
    # its previous GTIDs are uuid:1-5
    series = BinlogSeries.open(corpus / "zalora-binlog-parser/gtid-fixtures/mysql-bin.01")
    sid = "10440e47-3885-11eb-ac5b-0242ac110002"
    found = find_by_gtid_set(series, GtidSet.parse(f"{sid}:5-10"))
    assert found.transaction is not None and found.transaction.gtid == f"{sid}:11"
    assert found.missing == GtidSet.parse(f"{sid}:1-4")
    assert f"missing: {sid}:1-4" in found.describe()
    whole = find_by_gtid_set(series, GtidSet.parse(f"{sid}:1-10"))
    assert whole.missing is None and "missing" not in whole.describe()

    # its GTID list is 0-3704-2814
    maria = BinlogSeries.open(corpus / "zalora-binlog-parser/fixtures/mysql-bin.07")
    behind = find_by_gtid_set(maria, MariaGtidPos.parse("0-3704-2000"))
    assert behind.missing == MariaGtidPos.parse("0-3704-2814")
    assert find_by_gtid_set(maria, MariaGtidPos.parse("0-3704-2814")).missing is None


@pytest.mark.parametrize("names", REAL_SERIES, ids=lambda n: n[0])
def test_split_points_cut_real_files_between_transactions(corpus: Path, names: list[str]) -> None:
    """Ranges cut at split points hold exactly the file's transactions: none cut, lost or doubled."""
    from binlake.position import split_points, transaction_ends
    from binlake.spark.changelog import file_changes

    path = corpus / names[0]
    size = path.stat().st_size
    every = max(size // 7, 200)
    cuts = split_points(path, every)
    ends = set(transaction_ends(path))
    assert cuts and set(cuts) <= ends
    assert all(b - a >= every for a, b in zip([0, *cuts], cuts, strict=False))
    whole = list(file_changes(path))
    pieces = []
    for lo, hi in zip([4, *cuts], [*cuts, None], strict=True):
        pieces += list(file_changes(path, start=lo if lo > 4 else None, stop=hi))
    assert whole and pieces == whole


def _clean_records() -> list[dict[str, Any]]:
    from tests.conftest import corpus_index

    return [
        r for r in corpus_index()["records"] if not r.get("problems") and r.get("events") and r["size"] > 2000
    ]


STARTS = ("GTID", "ANONYMOUS_GTID", "GTID_TAGGED", "MARIA_GTID")


@pytest.mark.parametrize("record", _clean_records(), ids=lambda r: r["path"])
def test_gtid_cuts_are_transaction_starts(corpus: Path, record: dict[str, Any]) -> None:
    """The header walk cuts only where a GTID event starts a transaction, and the ranges hold the
    file's changes exactly; a v4 file with GTID events is always walked, a file without them (or
    an old server's) is left to the header-only scan (None)."""
    from binlake.position import gtid_cuts
    from binlake.reader import BinlogReader
    from binlake.spark.changelog import file_changes

    path = corpus / record["path"]
    every = max(record["size"] // 5, 200)
    cuts = gtid_cuts(path, every)
    fde = record["fde"] or {}
    walkable = fde.get("binlog_version") == 4 and not fde["server_version"].startswith(("5.0.", "5.1."))
    has_gtids = any(k.split(":")[1] in STARTS for k in record["hist"])
    if cuts is None:
        assert not (walkable and has_gtids)
        return
    assert walkable and (has_gtids or not cuts)
    types = {ev.offset: ev.type_name for ev in BinlogReader(path, decode_rows=False)}
    assert all(types[c] in STARTS for c in cuts)
    assert all(b - a >= every for a, b in zip([4, *cuts], cuts, strict=False))
    whole = list(file_changes(path))
    pieces = []
    for lo, hi in zip([4, *cuts], [*cuts, None], strict=True):
        pieces += list(file_changes(path, start=lo if lo > 4 else None, stop=hi))
    assert pieces == whole


def test_a_file_still_being_written_ends_the_series_where_its_complete_part_ends(
    corpus: Path, tmp_path: Path
) -> None:
    """The last file of a live directory may end inside an event (the server is writing it): the
    search answers from its complete transactions, and past them gives the start of the one being
    written (not the file's size, not an error), and says where the file was cut. In an earlier
    file such a cut is damage and raises."""
    names = REAL_SERIES[0]
    first, second = (corpus / n for n in names)
    whole = BinlogSeries.open(first, second)
    txns = [t for t in all_transactions(whole) if t.order_key[0] == 1]
    assert len(txns) >= 3
    data = second.read_bytes()
    sid = txns[0].gtid.split(":")[0]
    for t in txns[-3:]:
        for cut in (t.start + 3, t.start + 19 + 2, (t.start + t.end) // 2, t.end - 1):
            live = tmp_path / f"cut{cut}"
            live.mkdir()
            (live / first.name).write_bytes(first.read_bytes())
            (live / second.name).write_bytes(data[:cut])
            series = BinlogSeries.open(live)
            done = [u for u in txns if u.end <= t.start]
            after_all = find_by_time(series, max(u.commit_time_us for u in txns) + 10**7)
            assert (after_all.position.file_seq, after_all.position.offset) == (1, t.start)
            assert after_all.transaction is None and after_all.cut is not None
            assert t.start <= after_all.cut < cut
            assert f"ends in an event cut short at offset {after_all.cut}" in after_all.describe()
            # a set holding every complete transaction: the same end, with the set executed
            have = GtidSet.parse(
                ",".join(u.gtid for u in gtid_transactions(whole) if u.order_key < (1, t.start))
            )
            by_set = find_by_gtid_set(series, have)
            assert by_set.position.offset == t.start and by_set.cut == after_all.cut
            # a complete transaction the set lacks is still found as before
            if done:
                lacking = GtidSet.parse(f"{sid}:1-{int(done[-1].gtid.split(':')[1]) - 1}")
                hit = find_by_gtid_set(series, lacking)
                assert hit.transaction is not None and hit.transaction.gtid == done[-1].gtid
                assert hit.cut is None
            # a cut in a file that is not the last is damage (the search reads on past it)
            (live / "replicated-bin.000003").write_bytes(data[:4])
            with pytest.raises(IncompleteTailError):
                find_by_gtid_set(BinlogSeries.open(live), have)


def gtid_transactions(series: BinlogSeries) -> list[Transaction]:
    return [t for t in all_transactions(series) if t.gtid]


def live_copy(tmp_path: Path, name: str, first: Path, second: Path, data: bytes) -> BinlogSeries:
    """A directory of ``first`` and ``data`` as ``second``'s name (the file being written)."""
    live = tmp_path / name
    live.mkdir()
    (live / first.name).write_bytes(first.read_bytes())
    (live / second.name).write_bytes(data)
    return BinlogSeries.open(live)


def test_a_live_file_ending_between_the_events_of_a_transaction(corpus: Path, tmp_path: Path) -> None:
    """Review of 06e61b7: the last file written up to an event boundary inside a transaction (its
    rows there, its XID not yet) — a transaction without its commit, which a read (``TailScan``,
    ``complete_end``) stops before. The search past every complete transaction must answer the start
    of the one being written, as it does when the cut falls inside an event; it answered the file's
    size: a position inside a transaction."""
    from binlake.position import last_boundary
    from binlake.reader import BinlogReader

    first, second = (corpus / n for n in REAL_SERIES[0])
    whole = BinlogSeries.open(first, second)
    txns = [t for t in all_transactions(whole) if t.file_seq == 1 and t.kind == "commit"]
    t = txns[-1]
    xid = [e.offset for e in BinlogReader(second) if t.start < e.offset < t.end and e.type_name == "XID"]
    assert xid  # the cut: just before the commit
    series = live_copy(tmp_path, "live", first, second, second.read_bytes()[: xid[0]])
    assert last_boundary(series.files[-1]) == t.start  # where a read of the live file stops
    found = find_by_time(series, max(u.commit_time_us for u in all_transactions(whole)) + 10**7)
    assert (found.position.file_seq, found.position.offset) == (1, t.start)
    assert (
        found.cut == t.start and f"a transaction without its commit at offset {t.start}" in found.describe()
    )


def test_a_live_file_of_only_the_magic_misses_nothing_before_it(corpus: Path, tmp_path: Path) -> None:
    """Review of 06e61b7 (find-position on a live directory): the server has just rotated, its new
    file holds only the magic (``tail.just_created``). Its creation time reads as 0, so the search
    took every earlier file as ended before any T and answered the end of the series, missing the
    transactions of the first file committed at or after T."""
    first, second = (corpus / n for n in REAL_SERIES[0])
    whole = BinlogSeries.open(first, second)
    early = [t for t in all_transactions(whole) if t.file_seq == 0 and t.commit_time_us]
    target = early[len(early) // 2]
    series = live_copy(tmp_path, "live", first, second, second.read_bytes()[:4])
    found = find_by_time(series, target.commit_time_us)
    assert found.position.file_seq == 0 and found.position.offset <= target.start


@pytest.mark.parametrize("cut", [4 + 10, 4 + 30, 126 + 10], ids=["fde-header", "fde-body", "previous-gtids"])
def test_a_live_file_cut_in_its_first_events(corpus: Path, tmp_path: Path, cut: int) -> None:
    """Review of 06e61b7: the last file cut inside its FORMAT_DESCRIPTION or PREVIOUS_GTIDS (the
    server has just created it; a read stops at offset 4, ``last_boundary``): the search must end the
    series where its complete part ends, as for a cut further on; it raised IncompleteTailError from
    ``file_start``."""
    first, second = (corpus / n for n in REAL_SERIES[0])
    whole = BinlogSeries.open(first, second)
    txns = all_transactions(whole)
    series = live_copy(tmp_path, "live", first, second, second.read_bytes()[:cut])
    found = find_by_time(series, max(t.commit_time_us for t in txns) + 10**7)
    assert found.transaction is None
    assert (found.position.file_seq, found.position.offset) in ((1, 4), (0, first.stat().st_size))
    have = GtidSet.parse(",".join(t.gtid for t in txns if t.gtid))
    assert find_by_gtid_set(series, have).transaction is None


@pytest.mark.parametrize(
    "cut", [4 + 10, 4 + 30, 126, 126 + 10], ids=["fde-header", "fde-body", "fde-only", "previous-gtids"]
)
def test_a_live_file_cut_in_its_first_events_still_says_what_was_executed(
    corpus: Path, tmp_path: Path, cut: int
) -> None:
    """Newcomer (find-position on a copy of replicated-bin.00000{1,2} whose second file is cut in its
    PREVIOUS_GTIDS): the answer past every transaction printed no `executed before:` line at all
    (``Found.executed`` None), where a cut inside the FORMAT_DESCRIPTION or further on gives the GTIDs
    of the first file. A replica set up from that answer needs the set: every cut must give it."""
    first, second = (corpus / n for n in REAL_SERIES[0])
    whole = BinlogSeries.open(first, second)
    done = [t for t in all_transactions(whole) if t.file_seq == 0 and t.gtid]
    executed = GtidSet.parse(",".join(t.gtid for t in done))
    series = live_copy(tmp_path, "live", first, second, second.read_bytes()[:cut])
    later = max(t.commit_time_us for t in all_transactions(whole)) + 10**7
    found = find_by_time(series, later)
    assert found.transaction is None
    assert found.executed == executed, found.describe()
    assert f"executed before: {executed}" in found.describe()


def test_a_gtid_set_of_the_other_servers_kind_is_warned_of(corpus: Path) -> None:
    """Newcomer 55: a MariaDB position given for a MySQL series (or the other way) was answered
    with the series' start, silently: none of it can be there, and the answer says so."""
    mysql = BinlogSeries.open(corpus / REAL_SERIES[0][0])
    found = find_by_gtid_set(mysql, MariaGtidPos.parse("0-1-5"))
    assert found.warning is not None and "MariaDB GTID position was given" in found.describe()
    maria = BinlogSeries.open(corpus / "zalora-binlog-parser/fixtures/mysql-bin.07")
    other = find_by_gtid_set(maria, GtidSet.parse("10440e47-3885-11eb-ac5b-0242ac110002:1-3"))
    assert "a MySQL GTID set was given, but this series' transactions have MariaDB GTIDs" in other.describe()
    # of the right kind: no warning
    assert find_by_gtid_set(maria, MariaGtidPos.parse("0-3704-2814")).warning is None
    sid = all_transactions(mysql)[0].gtid.split(":")[0]
    assert find_by_gtid_set(mysql, GtidSet.parse(f"{sid}:1-2")).warning is None


def test_a_transaction_starts_where_the_grouper_says_and_nowhere_else(corpus: Path) -> None:
    """``starts_transaction`` (what ``startPosition`` checks): true at every transaction's first
    event (as the grouper finds them, the change log's ``txn_position``), false at every other
    event; a GTID event answers at once (no walk of the file: the grouper refuses to be built), a
    file without GTIDs (MySQL 5.0) by a walk."""
    import binlake.position as position
    from binlake.reader import BinlogReader

    def transaction_starts(path: Path) -> list[int]:
        return [t.start for t in iter_transactions((0, ev) for ev in BinlogReader(path))]

    for name in (
        "mysql-server-8.0.39/std_data/replicated-bin.000001",
        "mysql-server-8.0.39/std_data/binlog_transaction.000001",  # MySQL 5.0: BEGIN … XID
        "mysql-server-8.0.39/std_data/bug33029-slave-relay-bin.000001",  # 5.0: INTVAR, then a statement
    ):
        path = corpus / name
        starts = transaction_starts(path)
        assert len(starts) > 3
        events = [ev.offset for ev in BinlogReader(path)]
        assert all(position.starts_transaction(path, at) for at in starts), name
        inside = [at for at in events if at > starts[0] and at not in starts]
        assert inside and not any(position.starts_transaction(path, at) for at in inside), name

    class NoWalk:
        def __init__(self, *args: object, **kw: object) -> None:
            raise AssertionError("a GTID event at the offset needs no walk")

    path = corpus / "mysql-server-8.0.39/std_data/replicated-bin.000001"
    starts = transaction_starts(path)
    real = position.TransactionGrouper
    position.TransactionGrouper = NoWalk  # type: ignore[assignment, misc]
    try:
        assert all(position.starts_transaction(path, at) for at in starts)
    finally:
        position.TransactionGrouper = real  # type: ignore[misc]
