"""A read of the last change per key (``arrowlog.compact``, option ``changes=last``) loses nothing a
sync needs: over windows of any size, the last change per key of what it keeps is the last change
per key of every change (found here row by row, the plain way), every change is counted once, DDL
and keyless changes are all there, each server keeps a row and each layout a row carrying its
columns. Generated series (hot keys, renames, drops, added columns) and the corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from binlake.arrowlog import compact
from binlake.arrowlog.changelog import ColumnsOnce, Trim, transaction_batches
from binlake.arrowlog.compact import WINDOW_BYTES, compacted_schema, last_per_key
from binlake.arrowlog.variant import decode
from binlake.changes import KEY_WIDTH, TOMBSTONE
from binlake.errors import BinlogError
from binlake.events.types import EventType
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.render.values import PARTIAL_JSON_KEY
from binlake.spark.changelog import file_batches, file_transactions
from tests.conftest import CORPUS, corpus_index
from tests.support.written import written

ROWS = {"insert", "update", "delete"}


def plain_latest(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], tuple[bytes, str]]:
    """The last change per (table, key): its order key and op — each row in order key order, a
    primary-key update also deleting its old key. A table is its name followed through renames (a
    row of ``a`` before ``RENAME TABLE a TO b`` and one of ``b`` after are of one table, as the
    plan names both ``b``); a drop, or a rename away, ends it (a later table of the name is
    another). A table is named by where it began — its first name and the DDL before which it did
    not exist — whatever rows of it are present, so a read keeping fewer rows names it alike."""
    rows = sorted(rows, key=lambda r: r["order_key"])
    tables: dict[tuple[str, str], tuple[Any, ...]] = {}  # a name -> the table it is now
    ended: dict[tuple[str, str], bytes] = {}  # a name -> where its last table ended
    out: dict[tuple[Any, ...], tuple[bytes, str]] = {}

    def table(name: tuple[str, str]) -> tuple[Any, ...]:
        return tables.get(name) or (name, ended.get(name, b""))

    def put(r: dict[str, Any], key: Any, order: bytes, op: str) -> None:
        k = (table((r["db"], r["table"])), key["value"], key["metadata"])
        if k not in out or out[k][0] < order:
            out[k] = (order, op)

    for r in rows:
        if r["op"] in ("rename_table", "drop_table"):
            old, new = (
                None
                if image is None
                else (lambda n: (n["db"], n["table"]))(decode(image["value"], image["metadata"]))
                for image in (r["before"], r["after"])
            )
            if old is not None:
                moved = table(old)
                tables.pop(old, None)
                ended[old] = r["order_key"]
                if r["op"] == "rename_table" and new is not None:
                    tables[new] = moved
            continue
        if r["op"] not in ROWS or r["pk"] is None:
            continue
        put(r, r["pk"], r["order_key"], r["op"])
        old = r["pk_before"]
        if r["op"] == "update" and old is not None and old != r["pk"]:
            tombstone = r["order_key"][: KEY_WIDTH - 1] + bytes([TOMBSTONE])
            put(r, old, tombstone, "delete")
    return out


def is_partial_json(r: dict[str, Any]) -> bool:
    """A partial JSON update (a column of the after image an object ``{"json_diff": [edits]}``)."""
    if r["op"] != "update" or r["after"] is None:
        return False
    image = decode(r["after"]["value"], r["after"]["metadata"])
    return any(isinstance(v, dict) and PARTIAL_JSON_KEY in v for v in image.values())


def check(path: Path, window: int, once: bool, window_bytes: int = WINDOW_BYTES) -> tuple[int, int]:
    trim = Trim(ColumnsOnce() if once else None, keyed_before=False)
    try:
        batches = list(transaction_batches(file_transactions(path), size=64, trim=trim))
    except BinlogError:
        pytest.skip(f"{path.name}: not readable whole")
    every = pa.Table.from_batches(batches, trim.schema).to_pylist()
    counted = compacted_schema(trim.schema)
    kept = pa.Table.from_batches(
        last_per_key(batches, trim.schema, window, window_bytes), counted
    ).to_pylist()
    assert_kept(every, kept, once)
    return len(every), len(kept)


def assert_kept(every: list[dict[str, Any]], kept: list[dict[str, Any]], once: bool) -> None:
    """What a read of the last changes per key (``kept``, as rows) must hold of ``every`` change."""
    assert plain_latest(kept) == plain_latest(every)
    assert sum(r["changes"] for r in kept if r["op"] in ROWS) == sum(r["op"] in ROWS for r in every)
    rest = [
        {k: v for k, v in r.items() if k not in ("changes", "partial", "json_edits")}
        for r in kept
        if r["op"] not in ROWS or r["pk"] is None
    ]
    assert rest == [r for r in every if r["op"] not in ROWS or r["pk"] is None]  # in order
    assert {r["server_id"] for r in kept} == {r["server_id"] for r in every}
    partial = {r["order_key"] for r in every if is_partial_json(r)}  # kept: the plan refuses them
    assert partial <= {r["order_key"] for r in kept}
    assert {r["order_key"] for r in kept if r["json_edits"]} == partial  # and said so, exactly
    widths = {r["layout"]: len(r["columns"]) for r in every if once and r["columns"] is not None}
    for r in kept:  # ``partial``: exactly the inserts and updates whose image lacks columns
        if r["op"] in ("insert", "update"):
            width = len(r["columns"]) if r["columns"] is not None else widths[r["layout"]]
            assert r["partial"] is (len(decode(**r["after"])) < width)
        else:
            assert r["partial"] is False
    if once:  # a layout's rows in the output come with its columns, as the input's did
        carried = {r["layout"] for r in kept if r["columns"] is not None}
        assert {r["layout"] for r in kept if r["op"] in ROWS} <= carried
    assert [r["order_key"] for r in kept] == sorted(r["order_key"] for r in kept)  # in order


@pytest.mark.parametrize("window", [7, 300, 1_000_000])
@pytest.mark.parametrize("once", [True, False], ids=["columns-once", "columns-every"])
def test_generated_hot_keys_with_ddl(tmp_path: Path, window: int, once: bool) -> None:
    generate(tmp_path, seed=9, target_bytes=200_000, max_file_size=None, ddl_every=25, keys_per_table=30)
    (path,) = sorted(tmp_path.glob("binlog.0*"))
    every, kept = check(path, window, once)
    if window > every:  # one window: 3 tables of 30 keys, the DDL and a carrier per layout left
        assert kept < every / 3
    if window == 300:  # windows roll: what one keeps goes into the next, so three keep what one does
        assert every > 2 * window and kept == check(path, 1_000_000, once)[1]


@pytest.mark.parametrize("window_bytes", [1, 50_000])
def test_windows_bounded_by_bytes(tmp_path: Path, window_bytes: int) -> None:
    """Windows cut by their bytes (wide rows) before their row count: one batch of 64 rows, a few."""
    generate(tmp_path, seed=9, target_bytes=200_000, max_file_size=None, ddl_every=25, keys_per_table=30)
    (path,) = sorted(tmp_path.glob("binlog.0*"))
    check(path, 1_000_000, True, window_bytes)


def corpus_files() -> list[Path]:
    records = [r for r in corpus_index()["records"] if "path" in r and not r.get("problems")]
    return [CORPUS / r["path"] for r in records if any("ROWS" in k for k in r.get("hist", {}))]


@pytest.mark.parametrize("path", corpus_files() or [None], ids=lambda p: p.name if p else "no corpus")
def test_corpus(path: Path | None) -> None:
    if path is None:
        pytest.skip(f"real binlog corpus not found at {CORPUS}")
    check(path, 64, once=True)


def test_partial_json_updates_are_kept(mysql: Any, tmp_path: Path) -> None:
    """Partial JSON updates (``PARTIAL_JSON``, MINIMAL images) of keyed rows replaced by later
    updates: found by their bytes, exactly those (not the other updates of the table, whose layout's
    metadata names the key too), and kept in windows of every size, for the plan to refuse."""
    doc = '{"a": 1, "b": "' + "x" * 200 + '"}'
    (copy,) = written(
        mysql,
        ["CREATE DATABASE IF NOT EXISTS pj", "CREATE TABLE pj.kept (id INT PRIMARY KEY, doc JSON, v INT)"],
        [
            "SET SESSION binlog_row_image = 'MINIMAL'",
            "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
            f"INSERT INTO pj.kept VALUES (1, '{doc}', 0), (2, '{doc}', 0), (3, '{doc}', 0)",
            "UPDATE pj.kept SET doc = JSON_SET(doc, '$.a', 2) WHERE id < 3",
            "UPDATE pj.kept SET v = 5",
            """UPDATE pj.kept SET doc = '{"c": 3}' WHERE id = 3""",
        ],
        tmp_path / "bin",
    ).iterdir()
    for window in (1, 3, 1_000):
        check(copy, window, once=True)
    trim = Trim(ColumnsOnce(), keyed_before=False)
    every = pa.Table.from_batches(list(transaction_batches(file_transactions(copy), trim=trim)), trim.schema)
    rows = every.to_pylist()
    keyed = pc.and_(pc.is_in(every["op"], pa.array(sorted(ROWS))), pc.is_valid(every["pk"]))
    found = compact._json_edits(every, keyed.combine_chunks())
    assert found.to_pylist() == [is_partial_json(r) for r in rows]
    assert sum(found.to_pylist()) == 2


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
def test_a_file_read_is_told_where_partial_updates_can_be(
    mysql: Any, tmp_path: Path, compressed: bool
) -> None:
    """A read of a file (``file_batches``) tells the compaction where PARTIAL_UPDATE_ROWS events are
    (a compressed transaction's: its payload's position, as its rows'), and only their rows are
    searched: the partial JSON updates are flagged exactly (not the updates of the same events that
    change no document) and the read equals one that searches every row."""
    doc = '{"a": 1, "b": "' + "y" * 200 + '"}'
    t = f"pk{int(compressed)}.t"
    (copy,) = written(
        mysql,
        [f"CREATE DATABASE pk{int(compressed)}", f"CREATE TABLE {t} (id INT PRIMARY KEY, doc JSON, v INT)"],
        [
            f"SET SESSION binlog_transaction_compression = {'ON' if compressed else 'OFF'}",
            "SET SESSION binlog_row_image = 'MINIMAL'",
            "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
            f"INSERT INTO {t} VALUES (1, '{doc}', 0), (2, '{doc}', 0), (3, '{doc}', 0)",
            f"UPDATE {t} SET doc = JSON_SET(doc, '$.a', 2), v = 1 WHERE id = 1",
            f"UPDATE {t} SET v = 5 WHERE id = 2",  # a PARTIAL_UPDATE_ROWS event, no document edited
            f"UPDATE {t} SET doc = JSON_REPLACE(doc, '$.a', 7) WHERE id = 3",
            f"""UPDATE {t} SET doc = '{{"json_diff": [{{"op": "x"}}]}}' WHERE id = 2""",  # a whole document
        ],
        tmp_path / "bin",
    ).iterdir()
    inner = [e for e in BinlogReader(copy) if e.inner_index is not None]  # a compressed transaction's
    assert any(e.kind == EventType.PARTIAL_UPDATE_ROWS for e in inner) is compressed
    trim = Trim(ColumnsOnce(), keyed_before=False, last=True)
    told = pa.Table.from_batches(list(file_batches(copy, trim=trim)), trim.read_schema).to_pylist()
    trim.once = ColumnsOnce()  # a read of its own: each layout's columns on its first row again
    built = list(transaction_batches(file_transactions(copy, raw_rows=True), trim=trim))
    searched = pa.Table.from_batches(last_per_key(built, trim.schema), trim.read_schema).to_pylist()
    assert told == searched
    every = pa.Table.from_batches(built, trim.schema).to_pylist()
    partial = [r["order_key"] for r in every if is_partial_json(r)]
    assert len(partial) == 2
    assert [r["order_key"] for r in told if r["json_edits"]] == partial


def test_names_reused_and_keys_moved_on_a_real_server(own_mariadb: Any, tmp_path: Path) -> None:
    """A table renamed away and one of its name created again, a table dropped and created again,
    primary keys moved back and forth: rows of one name and key on either side of a rename or drop
    are of two tables, a moved key is deleted — in windows of every size."""
    (copy,) = written(
        own_mariadb,
        ["CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY, v INT)"],
        [
            "INSERT INTO r.t VALUES (1, 1), (2, 2)",
            "UPDATE r.t SET v = 10 WHERE id = 1",
            "RENAME TABLE r.t TO r.u",
            "CREATE TABLE r.t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO r.t VALUES (1, 100)",
            "UPDATE r.t SET id = 5 WHERE id = 1",  # moved: 1 deleted
            "UPDATE r.t SET v = 6 WHERE id = 5",  # replaces the move, not the delete of 1
            "UPDATE r.u SET id = 7 WHERE id = 2",
            "UPDATE r.u SET v = 70 WHERE id = 7",
            "INSERT INTO r.u VALUES (2, 20)",  # the moved-away key again
            "DROP TABLE r.t",
            "CREATE TABLE r.t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO r.t VALUES (5, 500)",
            "UPDATE r.t SET v = 501 WHERE id = 5",
        ],
        tmp_path / "bin",
    ).iterdir()
    for window in (1, 3, 1_000):
        for once in (True, False):
            every, kept = check(copy, window, once)
            assert kept < every


def test_a_table_followed_through_renames_on_a_real_server(own_mariadb: Any, tmp_path: Path) -> None:
    """Two tables swapped by renames (their keys the same) and one renamed again: a table's
    changes under its old name and its new one are of one table — the later replaces the earlier,
    as the plan keeps it under the batch's last name — and the swapped tables stay two."""
    (copy,) = written(
        own_mariadb,
        [
            "CREATE DATABASE s",
            "CREATE TABLE s.a (id INT PRIMARY KEY, v INT)",
            "CREATE TABLE s.b (id INT PRIMARY KEY, v INT)",
        ],
        [
            "INSERT INTO s.a VALUES (1, 1), (2, 2)",
            "INSERT INTO s.b VALUES (1, 10), (2, 20)",
            "RENAME TABLE s.a TO s.tmp, s.b TO s.a, s.tmp TO s.b",
            "UPDATE s.a SET v = 11 WHERE id = 1",  # b's row 1: replaces b's insert of 1
            "UPDATE s.b SET v = 3 WHERE id = 1",  # a's row 1: replaces a's insert of 1
            "RENAME TABLE s.b TO s.c",
            "UPDATE s.c SET v = 4 WHERE id = 2",  # a's row 2: replaces a's insert of 2
        ],
        tmp_path / "bin",
    ).iterdir()
    every, kept = check(copy, 1_000, once=False)
    assert every - kept == 3  # of 7 row changes, 4 last ones: none replaced across tables
    every, kept = check(copy, 1_000, once=True)  # the first row of each layout kept: it carries it
    assert 0 < every - kept <= 3


def widened(batch: pa.RecordBatch, width: int) -> pa.RecordBatch:
    """``batch`` with every row change's ``after`` a string of ``width`` bytes (a wide row: a
    document, a BLOB), as a VARIANT long string (basic type 0x40, a 4-byte length)."""
    rows = pc.is_in(batch.column("op"), pa.array(sorted(ROWS)))
    value = bytes([0x40]) + width.to_bytes(4, "little") + b"x" * width
    wide = pa.StructArray.from_arrays(
        [pa.array([value] * batch.num_rows, pa.binary()), pa.array([b"\x01\x00\x00"] * batch.num_rows)],
        fields=list(batch.schema.field("after").type),
    )
    after = pc.if_else(rows, wide, batch.column("after"))
    return batch.set_column(batch.schema.get_field_index("after"), "after", after)


@pytest.mark.slow
def test_a_window_of_wide_rows_is_held_under_2_gib(tmp_path: Path) -> None:
    """Rows of 40 KB images: 65,536 of them would be 2.6 GB, past what one Arrow binary column holds
    (int32 offsets: 2 GiB). A window held whole by its row count alone failed (``combine_chunks``:
    offset overflow) where the read without ``changes=last`` streamed batches of 4,096 rows; here a
    window is bounded by its bytes too. (A range of one big transaction, a merged read: nothing else
    bounds a window's bytes.) Holds ~2.2 GB."""
    generate(tmp_path, seed=9, target_bytes=300_000, max_file_size=None, ddl_every=25, keys_per_table=30)
    (path,) = sorted(tmp_path.glob("binlog.0*"))
    trim = Trim(ColumnsOnce(), keyed_before=False)
    batches = list(transaction_batches(file_transactions(path), size=64, trim=trim))
    every = pa.Table.from_batches(batches, trim.schema)
    n = int(pc.sum(pc.is_in(every["op"], pa.array(sorted(ROWS)))).as_py())
    assert n < compact.WINDOW_ROWS  # one window by rows
    width = 2**31 // n + 1  # their images: just over 2 GiB
    wide = [widened(b, width) for b in batches]
    counted = compacted_schema(trim.schema)
    kept = pa.Table.from_batches(last_per_key(wide, trim.schema), counted)
    del wide
    row = pc.is_in(kept["op"], pa.array(sorted(ROWS)))
    slim = kept.set_column(
        kept.schema.get_field_index("after"),
        "after",
        pc.if_else(row, pa.nulls(len(kept), kept.schema.field("after").type), kept["after"]),
    ).to_pylist()  # rows' images aside: what is left is small
    assert plain_latest(slim) == plain_latest(every.to_pylist())
    assert sum(r["changes"] for r in slim if r["op"] in ROWS) == n


def test_tables_with_partial_images_keep_every_change(own_mariadb: Any, tmp_path: Path) -> None:
    """MINIMAL/NOBLOB images (an update logs the columns it changed): the plan folds a key's images
    column by column, so a table with an image lacking columns keeps every change of the window,
    while a table logged whole is compacted as before — also past 255 columns, where an object
    counts its fields in four bytes."""
    wide = ", ".join(f"c{i} INT DEFAULT {i}" for i in range(300))
    (copy,) = written(
        own_mariadb,
        [
            "CREATE DATABASE p",
            "CREATE TABLE p.whole (id INT PRIMARY KEY, a INT, b INT)",
            "CREATE TABLE p.part (id INT PRIMARY KEY, a INT, b INT)",
            f"CREATE TABLE p.wide_whole (id INT PRIMARY KEY, {wide})",
            f"CREATE TABLE p.wide_part (id INT PRIMARY KEY, {wide})",
        ],
        [
            "INSERT INTO p.whole VALUES (1, 1, 1), (2, 2, 2)",
            "INSERT INTO p.part VALUES (1, 1, 1), (2, 2, 2)",
            "INSERT INTO p.wide_whole (id) VALUES (1)",
            "INSERT INTO p.wide_part (id) VALUES (1)",
            *[f"UPDATE p.whole SET a = {i} WHERE id = 1" for i in range(5)],
            *[f"UPDATE p.wide_whole SET c7 = {i} WHERE id = 1" for i in range(5)],
            "SET SESSION binlog_row_image = 'MINIMAL'",
            "UPDATE p.part SET a = 10 WHERE id = 1",
            "UPDATE p.part SET b = 20 WHERE id = 1",
            "UPDATE p.part SET a = 30 WHERE id = 2",
            "UPDATE p.wide_part SET c7 = 70 WHERE id = 1",
            "UPDATE p.wide_part SET c8 = 80 WHERE id = 1",
        ],
        tmp_path / "bin",
    ).iterdir()
    for once in (True, False):
        trim = Trim(ColumnsOnce() if once else None, keyed_before=False)
        batches = list(transaction_batches(file_transactions(copy), size=4, trim=trim))
        every = pa.Table.from_batches(batches, trim.schema).to_pylist()
        for window in (1, 4, 1_000):
            check(copy, window, once)
            kept = pa.Table.from_batches(
                last_per_key(batches, trim.schema, window), compacted_schema(trim.schema)
            ).to_pylist()
            keys = {r["order_key"] for r in kept}
            for table in ("part", "wide_part"):
                mine = [r["order_key"] for r in every if r["table"] == table]
                assert len(mine) > 2 and set(mine) <= keys
                assert sum(r["changes"] for r in kept if r["table"] == table) == len(mine)
            if window == 1_000:  # one window: the whole tables' hot key down to its last change
                for table in ("whole", "wide_whole"):
                    mine = [r for r in every if r["table"] == table]
                    assert len([r for r in kept if r["table"] == table]) <= len(mine) - 4


def test_json_edits_exact_over_lookalikes_moves_renames_and_wide_layouts(mysql: Any, tmp_path: Path) -> None:
    """Review of 042affd: ``json_edits`` says exactly which updates hold a partial JSON update, in
    windows of every size: not a document, VARCHAR or BLOB holding the text of an edit list, nor a
    column named json_diff; yes one followed by a rename of its table, and one in a layout of over
    255 names (the key's id two bytes wide, so are the marks searched); not an empty edit list (a
    no-op assignment, which MySQL logs as no edits: the column is unchanged), nor edits over a
    before image holding the document — a keyless table's, a key-moving one's under NOBLOB — which
    are applied (``changes.settled_rows``)."""
    look = '{"json_diff": [{"op": "x"}]}'
    doc = '{"a": 1, "b": "' + "x" * 200 + '"}'
    wide = ", ".join(f"c{i} INT" for i in range(1, 299))
    (copy,) = written(
        mysql,
        [
            "DROP DATABASE IF EXISTS pjx",
            "CREATE DATABASE pjx",
            "CREATE TABLE pjx.u (id INT PRIMARY KEY, json_diff JSON, doc JSON, w VARCHAR(100), b BLOB)",
            "CREATE TABLE pjx.k (doc JSON, v INT)",
            "CREATE TABLE pjx.t (id INT PRIMARY KEY, doc JSON, v INT)",
            f"CREATE TABLE pjx.w (id INT PRIMARY KEY, {wide}, doc JSON)",
        ],
        [
            "SET SESSION binlog_row_image = 'MINIMAL'",
            f"INSERT INTO pjx.u VALUES (1, '{look}', '{look}', 'a', 'b')",
            f"UPDATE pjx.u SET json_diff = '[1]', doc = '{look}', w = '{look}', b = '{look}'",
            f"UPDATE pjx.u SET json_diff = '{look}'",
            "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
            f"INSERT INTO pjx.k VALUES ('{doc}', 0)",
            "UPDATE pjx.k SET doc = JSON_SET(doc, '$.a', 2)",
            f"INSERT INTO pjx.t VALUES (1, '{doc}', 0), (2, '{doc}', 0)",
            "UPDATE pjx.t SET v = v + 1, doc = JSON_SET(doc, '$.a', 1) WHERE id = 1",
            "SET SESSION binlog_row_image = 'NOBLOB'",
            "UPDATE pjx.t SET id = 12, doc = JSON_SET(doc, '$.a', 2) WHERE id = 2",
            "SET SESSION binlog_row_image = 'MINIMAL'",
            "UPDATE pjx.t SET doc = JSON_REMOVE(doc, '$.b') WHERE id = 1",
            "RENAME TABLE pjx.t TO pjx.t2",
            "UPDATE pjx.t2 SET v = 9 WHERE id = 1",
            f"INSERT INTO pjx.w (id, doc) VALUES (1, '{doc}')",
            "UPDATE pjx.w SET doc = JSON_SET(doc, '$.a', 3)",
        ],
        tmp_path / "bin",
    ).iterdir()
    for window in (1, 2, 1_000):
        for once in (True, False):
            check(copy, window, once)
    trim = Trim(ColumnsOnce(), keyed_before=False)
    every = pa.Table.from_batches(list(transaction_batches(file_transactions(copy), trim=trim)), trim.schema)
    rows = every.to_pylist()
    found = compact._json_edits(every, pc.is_in(every["op"], pa.array(sorted(ROWS))).combine_chunks())
    flagged = [(r["table"], r["position"]) for r, f in zip(rows, found.to_pylist(), strict=True) if f]
    assert [t for t, _ in flagged] == ["t", "w"]  # t: the MINIMAL JSON_REMOVE
    assert all(not f for r, f in zip(rows, found.to_pylist(), strict=True) if r["table"] == "u")
