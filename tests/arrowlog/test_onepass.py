"""The change log in one compiled pass (``arrowlog.changelog.transaction_batches`` and
``fed``, ``_fastvariant.BatchBuilder.add_transaction`` and ``_fastvariant.Grouper``) against the
reference: transactions of the pure ``TransactionGrouper``, their ``row_changes``, batches by the
pure builder. The same transactions, the same record batches (bytes, batch boundaries) or the same
error, on the corpus, generated series with DDL of every flavour, and event streams and fields the
one pass does not take."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from binlake.arrowlog.changelog import CHANGELOG_SCHEMA, changelog_batches, fed, transaction_batches
from binlake.changes import file_number, row_changes
from binlake.errors import BinlogError
from binlake.events.base import Event
from binlake.events.control import Xid
from binlake.events.gtid import Gtid, MariaGtid
from binlake.events.query import Query
from binlake.events.rows import ABSENT, Rows
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.spark.changelog import file_batches, file_changes, to_batches
from binlake.txn import UNFINISHED, Transaction, TransactionGrouper
from tests.conftest import corpus_index

pytest.importorskip(
    "binlake.arrowlog._fastvariant", reason="the compiled change log is not built (./dev setup)"
)

RECORDS = [r for r in corpus_index()["records"] if "path" in r and not r.get("problems")]


def events_of(path: Path, decode_rows: bool = True) -> list[Event]:
    """A file's events up to the first it cannot decode (a damaged tail ends the list)."""
    out: list[Event] = []
    try:
        for ev in BinlogReader(path, decode_rows=decode_rows):
            out.append(ev)
    except BinlogError:
        pass
    return out


def grouped(events: list[Event], compiled: bool) -> tuple[list[Transaction], TransactionGrouper]:
    g = TransactionGrouper()
    return list(fed(events, 7, g, compiled=compiled)), g


def same_grouping(events: list[Event]) -> list[Transaction]:
    """The compiled grouping gives the reference's transactions, and leaves its state."""
    want, gw = grouped(events, False)
    got, gg = grouped(events, True)
    assert got == want
    for name in ("current", "pending", "_payload_size", "_last_end", "_last_source"):
        assert getattr(gg, name) == getattr(gw, name), name
    assert gg.finish() == gw.finish()
    return want


def reference(transactions: list[Transaction], size: int, source: str = "") -> Any:
    changes = (c for t in transactions for c in row_changes(t, None, source))
    return list(changelog_batches(changes, size, compiled=False))


def outcome(build: Callable[[], list[pa.RecordBatch]]) -> Any:
    """The batches, or the error (type and message) building them raised."""
    try:
        return build()
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return (type(e), str(e))


def same_batches(
    transactions: list[Transaction],
    size: int = 4096,
    source: str = "",
    boundaries: bool = True,
    raw: list[Transaction] | None = None,
) -> int:
    """The one pass gives the reference's record batches (or its error); returns the rows.
    ``raw``: the same file's finished transactions read with row decoding off, whose images the
    one pass writes from the rows' bytes: the same batches too; where decoding met damage that
    reading with it off passes (more transactions), the one pass raises it (a ``BinlogError``)."""
    finished = [t for t in transactions if t.kind != UNFINISHED]
    want = outcome(lambda: reference(finished, size, source))
    got = outcome(lambda: list(transaction_batches(finished, source, size, compiled=True)))
    rows = same_outcome(got, want, boundaries)
    if raw is not None:
        got = outcome(lambda: list(transaction_batches(copied(raw), source, size, compiled=True)))
        if len(raw) > len(finished):
            assert isinstance(got, tuple) and issubclass(got[0], BinlogError), got
        else:
            assert same_outcome(got, want, boundaries) == rows
    return rows


def same_outcome(got: Any, want: Any, boundaries: bool = True) -> int:
    """``got`` is ``want``: the same error, or the same batches (and batch boundaries when
    ``boundaries``); returns the rows."""
    if isinstance(want, tuple):
        assert got == want
        return 0
    assert not isinstance(got, tuple), got
    if boundaries:
        assert [b.num_rows for b in got] == [b.num_rows for b in want]
        for a, b in zip(got, want, strict=True):
            assert a.equals(b)
            for name in ("before", "after", "pk", "pk_before"):
                for part in ("value", "metadata"):
                    assert a.column(name).field(part).to_pylist() == b.column(name).field(part).to_pylist()
    schema = CHANGELOG_SCHEMA
    assert pa.Table.from_batches(got, schema).equals(pa.Table.from_batches(want, schema))
    return sum(b.num_rows for b in want)


def finished(events: list[Event]) -> list[Transaction]:
    return [t for t in grouped(events, False)[0] if t.kind != UNFINISHED]


def copied(transactions: list[Transaction]) -> list[Transaction]:
    """Each transaction with a list of events of its own (a pass decoding rows replaces it)."""
    return [dataclasses.replace(t, events=list(t.events)) for t in transactions]


@pytest.mark.parametrize("rec", RECORDS or [{}], ids=[r["path"] for r in RECORDS] or ["no corpus"])
def test_corpus_alike(corpus: Path, rec: dict) -> None:
    if "path" not in rec:
        pytest.skip("no corpus")
    events = events_of(corpus / rec["path"])
    transactions = same_grouping(events)
    raw = finished(events_of(corpus / rec["path"], decode_rows=False))
    same_batches(transactions, raw=raw)
    same_batches(transactions, size=3, source="src", raw=raw)


# files that begin with no format description, read with ``require_fde=False`` as the reader
# allows: a fragment of a PolarDB-X CDC stream (its GTID, sequence and GCN events among statements)
# and a MySQL test file
NO_FDE = [
    "polardb-polardbx-cdc/polardbx-cdc-canal/mysql_bin.19_1",
    "mysql-server-8.0.39/std_data/binlog_no_fd_event.000001",
]


@pytest.mark.parametrize("path", NO_FDE)
def test_files_without_a_format_description_alike(corpus: Path, path: str) -> None:
    """The compiled grouping and batches of a file read without its format description are the
    reference's, the grouper's state included."""
    events: list[Event] = []
    try:
        for ev in BinlogReader(corpus / path, require_fde=False):
            events.append(ev)
    except BinlogError:
        pass
    assert events, f"{path}: nothing read"
    transactions = same_grouping(events)
    assert transactions
    same_batches(transactions)
    same_batches(transactions, size=1, source="src")


class _Gone:
    """An event no batch may read again: any field of it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"an event before the cursor was read again ({name})")


# transactions of many rows events (MySQL 8, MySQL 5)
MANY_ROWS = [
    "mysql-server-8.0.39/zip-extracted/upgrade/data_wl13352_8017/data_upgrade/binlog.000002",
    "osheroff-mysql-binlog-connector-java/mysql-bin.sakila",
]


@pytest.mark.parametrize("name", MANY_ROWS)
@pytest.mark.parametrize("size", [2, 7])
@pytest.mark.parametrize("compiled_rows", [True, False], ids=["from-bytes", "decoded"])
def test_a_batch_goes_on_where_the_last_filled(
    corpus: Path, name: str, size: int, compiled_rows: bool
) -> None:
    """A transaction of many rows in small batches: each batch goes on from where the last one
    filled (``Cursor``: the event, the row, the byte of its rows), reading no event before it
    again — each event read once, not once per batch after it — and the batches hold the
    reference's rows in order. Rows written from their bytes, and (the compiled row decoder not
    chosen) rows the one pass decodes first."""
    from binlake.arrowlog import _fastvariant
    from binlake.arrowlog.changelog import _built, _name_images
    from binlake.arrowlog.images import image_cache
    from binlake.changes import _file_name, _layouts
    from binlake.values.plan import ROWS

    want = pa.Table.from_batches(reference(finished(events_of(corpus / name)), 4096), CHANGELOG_SCHEMA)
    ROWS.choose(compiled_rows)
    try:
        raw = finished(events_of(corpus / name, decode_rows=False))
        t = copied([max(raw, key=lambda t: sum(isinstance(e.body, Rows) for e in t.events))])[0]
        tables: dict[int, Any] = {}
        at, got, cut, inside = _fastvariant.Cursor(), [], 0, set()
        while True:
            builder = _fastvariant.BatchBuilder(image_cache(True), _name_images, tables)
            status = builder.add_transaction(t, "", at, size, _layouts, file_number, _file_name)
            got.append(_built(builder))
            if status == 0:
                break
            assert status == 1 and got[-1].num_rows == size and at.taken == sum(b.num_rows for b in got)
            t.events[cut : at.event] = [_Gone()] * (at.event - cut)  # what the next batch must not need
            cut = at.event
            inside.add(("row", "byte")[at.byte > 0] if at.row else None)  # a batch filled inside an event
    finally:
        ROWS.choose(True)
    assert cut > 1 and len(got) > 1
    # inside an event: at a byte of rows written from their bytes, at a row of decoded ones
    assert {"row", "byte"} & inside == {"byte" if compiled_rows else "row"}
    want = want.filter(pa.compute.equal(want.column("txn_position"), t.start))
    assert pa.Table.from_batches(got, CHANGELOG_SCHEMA).equals(want)


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb", "mysql57"])
def test_generated_series_alike(tmp_path: Path, flavor: str) -> None:
    """Every type, DDL (renames, drops, added columns) every 15 transactions."""
    result = generate(tmp_path / "bin", flavor=flavor, seed=11, target_bytes=500_000, ddl_every=15)
    rows = 0
    for f in result.files:
        transactions = same_grouping(events_of(Path(f)))
        assert any(t.kind == "ddl" for t in transactions)
        raw = finished(events_of(Path(f), decode_rows=False))
        rows += same_batches(transactions, raw=raw)
        same_batches(transactions, size=5, raw=raw)
    assert rows > 1000


def test_the_grouper_reads_slots() -> None:
    """The compiled grouper reads events, headers, bodies and transactions from their slots: the
    classes have the shape it reads (else every event goes the pure grouper's way, slowly)."""
    from binlake.arrowlog import _fastvariant

    assert _fastvariant.SLOTS_READ


def test_leaving_fed_early_leaves_the_grouper_as_the_reference(tmp_path: Path) -> None:
    """The compiled grouper writes where the open transaction ends into the pure grouper lazily: a
    consumer that leaves ``fed`` after some transactions, or whose events end inside one, finds the
    grouper as the reference leaves it after the same events (``finish`` included)."""
    result = generate(tmp_path / "bin", flavor="mysql80", seed=3, target_bytes=60_000)
    events = events_of(Path(result.files[0]))
    ends = [i for i, ev in enumerate(events) if type(ev.body) is Xid]
    for cut in (ends[5] + 1, ends[5] + 4):  # just past an XID; inside the transaction after it
        stream = events[:cut]
        g, ref = TransactionGrouper(), TransactionGrouper()
        it = fed(iter(stream), 7, g, compiled=True)
        # as many as end with the sixth XID: the last one taken was grouped in C
        taken = len(finished(events[: ends[5] + 1]))
        got = list(itertools.islice(it, taken))
        it.close()
        used = events.index(got[-1].events[-1]) + 1  # the events the compiled grouper took
        assert used == ends[5] + 1
        want = [t for ev in stream[:used] for t in ref.feed(7, ev)]
        assert got == want
        for name in ("current", "pending", "_last_end", "_last_source"):
            assert getattr(g, name) == getattr(ref, name), name
        g, ref = TransactionGrouper(), TransactionGrouper()
        assert list(fed(stream, 7, g, compiled=True)) == [t for ev in stream for t in ref.feed(7, ev)]
        assert (g._last_end, g._last_source) == (ref._last_end, ref._last_source)
        assert g.finish() == ref.finish()


def test_file_batches_are_the_data_sources_batches(tmp_path: Path) -> None:
    """``file_batches`` (the data source) gives ``to_batches(file_changes(...))``, pure and compiled,
    ranges and selections included."""
    result = generate(tmp_path / "bin", seed=4, target_bytes=300_000, ddl_every=25)
    f = result.files[0]
    for kw in ({}, {"source": "s", "start": None, "stop": None}):
        got = pa.Table.from_batches(list(file_batches(f, **kw)))
        want = pa.Table.from_batches(list(changelog_batches(file_changes(f, **kw), compiled=False)))
        assert got.equals(want)
    cut = [t for t in (grouped(events_of(Path(f)), False)[0]) if t.kind != UNFINISHED][10]
    got = list(file_batches(f, start=cut.start, stop=None))
    assert pa.Table.from_batches(got).equals(
        pa.Table.from_batches(list(to_batches(file_changes(f, start=cut.start))))
    )


def _mutations(events: list[Event]) -> Iterator[list[Event]]:
    """Streams the grouper's slow paths take: commits missing (a GTID abandons the open
    transaction), GTIDs missing (BEGIN opens), BEGINs missing, an XID with nothing open."""
    xids = [e for e in events if isinstance(e.body, Xid)]
    yield [e for e in events if not isinstance(e.body, Xid)]
    yield [e for e in events if not isinstance(e.body, (Gtid, MariaGtid))]
    yield [e for e in events if not (isinstance(e.body, Query) and e.body.query == "BEGIN")]
    yield xids[:3] + events
    yield events[: len(events) // 2] + events[: len(events) // 2]


def test_odd_streams_group_alike(tmp_path: Path) -> None:
    for flavor in ("mysql80", "mariadb"):
        result = generate(tmp_path / flavor, flavor=flavor, seed=2, target_bytes=150_000, ddl_every=10)
        events = events_of(Path(result.files[0]))
        for stream in _mutations(events):
            same_batches(same_grouping(stream), boundaries=False)


def _with_event(t: Transaction, i: int, ev: Event) -> Transaction:
    events = list(t.events)
    events[i] = ev
    return dataclasses.replace(t, events=events)


def test_fields_the_one_pass_does_not_take(tmp_path: Path) -> None:
    """A position past int64, a transaction start past the order key's range, a gtid that is not
    text, a value the column's encoder refuses, a rows event of another operation, a row that is
    not a pair: the same rows or the same error as the reference, from any change on."""
    result = generate(tmp_path / "bin", seed=8, target_bytes=100_000)
    ts = [t for t in grouped(events_of(Path(result.files[0])), False)[0] if t.kind == "commit"]
    t = next(t for t in ts if sum(isinstance(e.body, Rows) and len(e.body.rows) for e in t.events) >= 2)
    i = next(i for i, e in enumerate(t.events) if isinstance(e.body, Rows))
    ev, body = t.events[i], t.events[i].body
    row = body.rows[0]
    image = list(row[1] if row[1] is not None else row[0])
    odd = [
        _with_event(t, i, dataclasses.replace(ev, offset=2**64)),
        _with_event(t, i, dataclasses.replace(ev, offset=2**40)),
        dataclasses.replace(t, start=2**64),
        dataclasses.replace(t, start=-1),
        dataclasses.replace(t, gtid=b"x"),
        dataclasses.replace(t, commit_ts_us=None, commit_header_ts=0, last_committed=-1),
        _with_event(t, i, dataclasses.replace(ev, body=dataclasses.replace(body, operation="rename_table"))),
        _with_event(t, i, dataclasses.replace(ev, body=dataclasses.replace(body, rows=[row, (image,)]))),
        _with_event(
            t,
            i,
            dataclasses.replace(ev, body=dataclasses.replace(body, rows=[row, (None, ["x"] * len(image))])),
        ),
        _with_event(
            t, i, dataclasses.replace(ev, body=dataclasses.replace(body, rows=[row, (None, image[:1])]))
        ),
    ]
    for bad in odd:
        for size in (1, 2, 4096):
            same_batches([ts[0], bad, ts[-1]], size=size, boundaries=False)


def test_pure_when_not_compiled(tmp_path: Path) -> None:
    result = generate(tmp_path / "bin", seed=6, target_bytes=100_000, ddl_every=10)
    ts = [t for t in grouped(events_of(Path(result.files[0])), False)[0] if t.kind != UNFINISHED]
    got = list(transaction_batches(ts, size=100, compiled=False))
    assert [b.num_rows for b in got] == [b.num_rows for b in reference(ts, 100)]
    assert pa.Table.from_batches(got).equals(pa.Table.from_batches(reference(ts, 100)))
    assert file_number(result.files[0]) == 1


def test_minimal_images_alike(tmp_path: Path) -> None:
    """MINIMAL/NOBLOB images: columns left out (``ABSENT``), the key among them: an after image
    without its key takes the before image's, an image without a key gives none."""
    result = generate(tmp_path / "bin", seed=12, target_bytes=100_000)
    ts = [t for t in grouped(events_of(Path(result.files[0])), False)[0] if t.kind == "commit"]
    odd = []
    for op in ("update", "insert", "delete"):
        t, i = next(
            (t, i)
            for t in ts
            for i, e in enumerate(t.events)
            if isinstance(e.body, Rows) and e.body.operation == op and e.body.table.primary_key
        )
        ev, body = t.events[i], t.events[i].body
        pk = body.table.primary_key
        full = list(body.rows[0][1] if op != "delete" else body.rows[0][0])

        def without(image: list[Any], cols: list[int]) -> list[Any]:
            return [ABSENT if j in cols else v for j, v in enumerate(image)]

        others = [j for j in range(len(full)) if j not in pk][:2]
        images = [without(full, pk), without(full, others), without(full, pk[:1] + others), full]
        if op == "update":
            rows = [(b, a) for b in images for a in images]
        elif op == "insert":
            rows = [(None, a) for a in images]
        else:
            rows = [(b, None) for b in images]
        odd.append(_with_event(t, i, dataclasses.replace(ev, body=dataclasses.replace(body, rows=rows))))
    for size in (1, 3, 4096):
        assert same_batches(odd, size=size) >= 20


def _rewritten(events: list[Event], compiled: bool, rewrite: Callable[[Event], None]) -> Any:
    """The transactions ``fed`` gives (or its error) to a consumer that rewrites the last event of
    each transaction it is given, as it goes."""
    g = TransactionGrouper()
    out: list[Any] = []
    try:
        for t in fed(events, 7, g, compiled=compiled):
            out.append((t.kind, t.start, t.end, t.gtid, len(t.events)))
            rewrite(t.events[-1])
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        out.append((type(e), str(e)))
    return out


def test_a_consumer_rewriting_an_event_it_was_given(tmp_path: Path) -> None:
    """The grouper is done with an event once the transaction that holds it is given: a consumer
    that then rewrites the event's fields (here its offset, as text) changes nothing of the
    grouping, pure or compiled. (The compiled grouper read the XID's offset again, lazily, when the
    next event went the pure grouper's way, and raised.)"""
    result = generate(tmp_path / "bin", flavor="mysql57", seed=3, target_bytes=30_000)
    events = events_of(Path(result.files[0]))

    def rewrite(ev: Event) -> None:
        ev.offset = str(ev.offset)

    want = _rewritten(events_of(Path(result.files[0])), False, rewrite)
    assert len(want) > 10 and not isinstance(want[-1][0], type)
    assert _rewritten(events, True, rewrite) == want


def test_a_consumer_replacing_an_events_header_crashes_nothing(tmp_path: Path) -> None:
    """The same with the event's header replaced by another object: the compiled grouper must not
    read it as an ``EventHeader`` (a slot read at an offset of an object of another class: the
    process died of a segmentation fault). Run in a child process, which a crash does not take
    the test run with."""
    import os
    import subprocess
    import sys

    result = generate(tmp_path / "bin", flavor="mysql57", seed=3, target_bytes=30_000)
    script = (
        "import sys\n"
        "from binlake.arrowlog.changelog import fed\n"
        "from binlake.reader import BinlogReader\n"
        "from binlake.txn import TransactionGrouper\n"
        "for compiled in (False, True):\n"
        "    g, n = TransactionGrouper(), 0\n"
        "    for t in fed(list(BinlogReader(sys.argv[1])), 7, g, compiled=compiled):\n"
        "        t.events[-1].header = 300  # the consumer's own record of the event\n"
        "        n += 1\n"
        "    print(compiled, n, g.finish())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(result.files[0])],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    pure, fast = done.stdout.splitlines()
    assert fast.replace("True", "False", 1) == pure
