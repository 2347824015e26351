"""A partial JSON update (MySQL 8 ``binlog_row_value_options=PARTIAL_JSON`` with MINIMAL images: the
after image holds edits of a document the binlog does not carry) is refused by every sink with one
typed error naming table, column and position — before anything is created in the target. Where the
before image holds the document (FULL, NOBLOB, keyless tables) the edits are applied and synced."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from binlake.arrowlog.images import PARTIAL_JSON_KEY
from binlake.errors import UnappliableChangeError
from binlake.events.rows import PartialJson
from binlake.events.types import EventType
from binlake.reader import BinlogReader
from binlake.spark.changelog import PARTIAL_JSON_MARK, file_changes, rows_of, to_batches
from tests.support.written import written

PARTIAL = "blackbeam-rust_mysql_common/json.binlog.000001"  # MySQL 8.0.22: PARTIAL_UPDATE_ROWS at 3750


@pytest.fixture
def partial_source(corpus: Path, tmp_path: Path) -> str:
    src = tmp_path / "bin"
    src.mkdir()
    shutil.copy(corpus / PARTIAL, src)
    return str(src)


def test_only_partial_updates_carry_the_mark(corpus: Path) -> None:
    """The partial updates' JSON column holds an object (its edits) where a JSON column otherwise
    holds a string, so the substring the sinks look for in ``to_json(after)`` is in their images and
    in no other: a string value holding the same characters is written escaped."""
    rows = [r for b in to_batches(file_changes(corpus / PARTIAL)) for r in rows_of(b)]
    marked = [
        r["position"]
        for r in rows
        if any(isinstance(v, dict) and PARTIAL_JSON_KEY in v for v in (r["after"] or {}).values())
    ]
    assert marked == [3750] * 6
    compact = json.dumps(next(r["after"] for r in rows if r["position"] == 3750), separators=(",", ":"))
    assert PARTIAL_JSON_MARK in compact  # as Spark's to_json writes it
    assert PARTIAL_JSON_MARK not in json.dumps(
        {"c": PARTIAL_JSON_MARK}, ensure_ascii=False, separators=(",", ":")
    )


def _assert_names_the_change(e: UnappliableChangeError) -> None:
    # the binlog carries minimal metadata; the column's name comes from its CREATE TABLE earlier in it
    assert (e.table, e.column, e.source, e.offset) == ("mysql.t", "json_col", "json.binlog.000001", 3750)
    assert "\n" not in str(e) and "mysql.t" in str(e) and "offset 3750" in str(e)


@pytest.mark.slow
@pytest.mark.parametrize("changes", ["last", "every"])
def test_delta_refuses_before_creating_anything(
    spark: Any, partial_source: str, tmp_path: Path, changes: str
) -> None:
    """Found by the batch's head from the read's ``json_edits`` (a sync's read, the last changes per
    key), or by a job of its own over the JSON columns of a read that does not say (every change)."""
    from binlake.spark.apply import sync

    target = tmp_path / "lake"
    with pytest.raises(UnappliableChangeError) as e:
        sync(spark, partial_source, target, options={"changes": changes})
    _assert_names_the_change(e.value)
    assert not target.exists()  # no table directory, no name book


@pytest.mark.slow
def test_jdbc_refuses_before_connecting(spark: Any, partial_source: str) -> None:
    """Refused before the target is even reached: port 1 has no server, so an attempt to connect
    would fail with a connection error instead."""
    from binlake.spark.apply import sync

    with pytest.raises(UnappliableChangeError) as e:
        sync(spark, partial_source, "jdbc:postgresql://127.0.0.1:1/nowhere?user=x")
    _assert_names_the_change(e.value)


# ---- review of 042affd: the head refuses from the read's ``json_edits`` (changes=last) where a read
# of every change is refused by a Spark job over the JSON columns; both must refuse the same batches
# with the same error, and neither may write an edit list as a document

DOC = '{"a": 1, "b": "' + "x" * 200 + '"}'  # long enough that MySQL logs an edit, not the document
LOOKALIKE = '{"json_diff": [{"op": "x"}]}'  # a user's document that reads like a partial update
PARTIAL_SESSION = [
    "SET SESSION binlog_row_image = 'MINIMAL'",
    "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
]


def _outcome(spark: Any, source: Path, target: Path, changes: str) -> Any:
    """What a sync reading with ``changes`` did: the refusal's (table, column, file, offset), or
    every target table's rows by key (without the batch columns)."""
    from binlake.spark.apply import sync
    from binlake.spark.sinks.delta import delta_tables, read_delta

    try:
        sync(spark, str(source), target, options={"changes": changes})
    except UnappliableChangeError as e:
        assert not target.exists()  # refused before anything was created
        return (e.table, e.column, e.source, e.offset)
    return {
        t: sorted(
            (
                {k: v for k, v in r.items() if not k.startswith("_binlake")}
                for r in read_delta(target, t).to_pylist()  # tombstones left out
            ),
            key=repr,
        )
        for t in delta_tables(target)
    }


def _both(spark: Any, mysql: Any, tmp_path: Path, setup: list[str], statements: list[str]) -> Any:
    """The binlog of ``statements`` synced reading the last changes and every change: one outcome."""
    source = written(mysql, setup, statements, tmp_path / "bin")
    last, every = (_outcome(spark, source, tmp_path / c, c) for c in ("last", "every"))
    assert last == every
    return last


def _setup(db: str, keyless: bool = False) -> list[str]:
    key = "" if keyless else " PRIMARY KEY"
    return [
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.t (id INT{key}, doc JSON, v INT)",
    ]


# A partial update with edits is refused by both reads at the same change: the first that holds
# edits. MySQL logs a JSON column an update leaves as it was (not in its SET; JSON_SET of the value it
# holds, JSON_REMOVE of a missing path) as an empty edit list: that column is unchanged, not refused
# (``changes.settled_rows``; review 31 found a read of every change writing ``{"json_diff":[]}``
# into the target as the document, and empty lists were refused from then to session 32, which
# found FULL images log one for every JSON column of every update).
NOBLOB_SESSION = ["SET SESSION binlog_row_image = 'NOBLOB'", PARTIAL_SESSION[1]]
FULL_SESSION = ["SET SESSION binlog_row_image = 'FULL'", PARTIAL_SESSION[1]]
REFUSED = {
    # replaced by later changes of their key (a whole document; a MINIMAL update of another column,
    # then a delete), and one followed by a rename of its table and a change of the key there
    "superseded-and-renamed": (
        False,
        [
            *PARTIAL_SESSION,
            "INSERT INTO {db}.t VALUES (1, '{doc}', 0), (2, '{doc}', 0), (3, '{doc}', 0)",
            "UPDATE {db}.t SET doc = JSON_SET(doc, '$.a', 2) WHERE id = 2",
            "UPDATE {db}.t SET v = 7 WHERE id = 2",
            "UPDATE {db}.t SET doc = JSON_SET(doc, '$.a', 3) WHERE id = 1",
            """UPDATE {db}.t SET doc = '{{"c": 3}}' WHERE id = 1""",
            "DELETE FROM {db}.t WHERE id = 2",
            "UPDATE {db}.t SET doc = JSON_REMOVE(doc, '$.b') WHERE id = 3",
            "RENAME TABLE {db}.t TO {db}.t2",
            "UPDATE {db}.t2 SET v = 9 WHERE id = 3",
        ],
    ),
    # a no-op before a real edit: refused at the edit
    "empty-then-edit": (
        False,
        [
            *PARTIAL_SESSION,
            "INSERT INTO {db}.t VALUES (1, '{doc}', 0), (2, '{doc}', 0)",
            "UPDATE {db}.t SET v = v + 1, doc = JSON_SET(doc, '$.a', 1) WHERE id = 1",
            "UPDATE {db}.t SET doc = JSON_SET(doc, '$.a', 5) WHERE id = 2",
        ],
    ),
}


# edits over a before image that holds the document (FULL, NOBLOB): applied as a replica applies them
# (``values.json_edits``), the target equal to the server's table
EDITED = {
    # a keyless table's: its before image holds every column, MINIMAL or not (its changes are kept)
    "keyless": [
        *PARTIAL_SESSION,
        "INSERT INTO {db}.t VALUES (1, '{doc}', 0)",
        "UPDATE {db}.t SET doc = JSON_SET(doc, '$.a', 2)",
    ],
    # FULL images, then an update of another column (the document as an empty edit list)
    "full-images": [
        *FULL_SESSION,
        "INSERT INTO {db}.t VALUES (1, '{doc}', 0), (2, '{doc}', 0)",
        "UPDATE {db}.t SET doc = JSON_SET(doc, '$.a', 2, '$.n', 3)",
        "UPDATE {db}.t SET v = 1",
        "UPDATE {db}.t SET doc = JSON_REMOVE(doc, '$.b') WHERE id = 2",
    ],
    # one that also moves its row's key (NOBLOB: the after image whole but for the edited
    # document), then replaced under its new key, and one edited again
    "key-moving": [
        *NOBLOB_SESSION,
        "INSERT INTO {db}.t VALUES (1, '{doc}', 0), (2, '{doc}', 0)",
        "UPDATE {db}.t SET id = 12, doc = JSON_SET(doc, '$.a', 2) WHERE id = 2",
        """UPDATE {db}.t SET doc = '{{"c": 3}}' WHERE id = 12""",
        "UPDATE {db}.t SET doc = JSON_SET(doc, '$.a', 5) WHERE id = 1",
        "UPDATE {db}.t SET doc = JSON_SET(doc, '$.z', 6) WHERE id = 1",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(EDITED))
def test_edits_over_whole_documents_are_synced(spark: Any, mysql: Any, tmp_path: Path, case: str) -> None:
    """Both reads sync them (none refused), and the target equals the server's table."""
    db, keyless = "pjs_" + case.replace("-", "_"), case == "keyless"
    statements = [st.format(db=db, doc=DOC) if "{db}" in st else st for st in EDITED[case]]
    got = _both(spark, mysql, tmp_path, _setup(db, keyless), statements)
    assert any(_edits(e) for f in sorted((tmp_path / "bin").iterdir()) for e in BinlogReader(f))
    rows, want = (
        sorted((_plain(r) for r in got[f"{db}.t"]), key=repr),
        sorted(mysql_rows(mysql, db), key=repr),
    )
    if keyless:  # the insert and the update, each with its document
        assert len(rows) == 2 and want[0] in rows and all(PARTIAL_JSON_KEY not in d for _, d, _ in rows)
    else:
        assert rows == want


@pytest.mark.slow
@pytest.mark.parametrize("case", list(REFUSED))
def test_partial_updates_refused_alike(spark: Any, mysql: Any, tmp_path: Path, case: str) -> None:
    """Each case's batch is refused by a read of the last changes per key (``json_edits``) and by
    one of every change alike: same table, column, file and offset — the first partial update with
    edits (its PARTIAL_UPDATE_ROWS event's), before anything is created."""
    keyless, statements = REFUSED[case]
    db = "pj_" + case.replace("-", "_")
    got = _both(
        spark,
        mysql,
        tmp_path,
        _setup(db, keyless),
        [st.format(db=db, doc=DOC) if "{db}" in st else st for st in statements],
    )
    assert isinstance(got, tuple) and got[:2] == (f"{db}.t", "doc")
    first = next(e for e in BinlogReader(tmp_path / "bin" / got[2]) if _edits(e))
    assert got[3] == first.offset


def _edits(e: Any) -> bool:
    """A PARTIAL_UPDATE_ROWS event with a JSON column given as edits (not an empty list)."""
    return e.kind == EventType.PARTIAL_UPDATE_ROWS and any(
        type(v) is PartialJson and v.diffs for _, after in e.body.rows for v in after or ()
    )


# updates that leave a JSON column as it was: MySQL logs it as an empty edit list (a FULL or NOBLOB
# image for every JSON column the update does not set; any image for a no-op assignment)
UNCHANGED = {
    image: [
        f"SET SESSION binlog_row_image = '{image}'",
        PARTIAL_SESSION[1],
        "INSERT INTO {db}.t VALUES (1, '{doc}', 0), (2, '{doc}', 0), (3, NULL, 0)",
        "UPDATE {db}.t SET v = 5 WHERE id = 1",
        "UPDATE {db}.t SET v = v + 1, doc = JSON_SET(doc, '$.a', 1) WHERE id = 2",
        "UPDATE {db}.t SET v = v + 1, doc = JSON_REMOVE(doc, '$.nope') WHERE id = 2",
        "UPDATE {db}.t SET v = 7 WHERE id = 3",
    ]
    for image in ("FULL", "NOBLOB", "MINIMAL")
}


@pytest.mark.slow
@pytest.mark.parametrize("keyless", [False, True], ids=["keyed", "keyless"])
@pytest.mark.parametrize("image", list(UNCHANGED))
def test_unchanged_json_columns_are_synced(
    spark: Any, mysql: Any, tmp_path: Path, image: str, keyless: bool
) -> None:
    """Both reads sync such updates: a keyed table equals the server's, the column keeping its
    document (a FULL/NOBLOB before image's; under MINIMAL the target's); a keyless table (its
    changes appended) holds each change with the document, never an edit list."""
    db = f"pju_{image.lower()}_{int(keyless)}"
    statements = [st.format(db=db, doc=DOC) if "{db}" in st else st for st in UNCHANGED[image]]
    got = _both(spark, mysql, tmp_path, _setup(db, keyless), statements)
    events = [e for f in sorted((tmp_path / "bin").iterdir()) for e in BinlogReader(f)]
    assert any(  # the binlog holds empty edit lists, and no edits
        type(v) is PartialJson and not v.diffs
        for e in events
        if e.kind == EventType.PARTIAL_UPDATE_ROWS
        for _, after in e.body.rows
        for v in after or ()
    )
    assert not any(_edits(e) for e in events)
    rows = [_plain(r) for r in got[f"{db}.t"]]
    if keyless:  # three inserts and four updates; under MINIMAL an update's image has its columns too
        assert len(rows) == 7 and {json.dumps(d) for _, d, _ in rows} == {json.dumps(json.loads(DOC)), "null"}
    else:
        assert sorted(rows, key=repr) == sorted(mysql_rows(mysql, db), key=repr)


def _plain(row: dict[str, Any]) -> tuple[Any, ...]:
    return row["id"], None if row["doc"] is None else json.loads(row["doc"]), row["v"]


def mysql_rows(mysql: Any, db: str) -> list[tuple[Any, ...]]:
    conn = mysql.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, doc, v FROM t")
            return [(i, None if d is None else json.loads(d), v) for i, d, v in cur.fetchall()]
    finally:
        conn.close()


@pytest.mark.slow
def test_documents_that_look_like_edits_are_synced(spark: Any, mysql: Any, tmp_path: Path) -> None:
    """A JSON document, a VARCHAR and a BLOB holding the text of an edit list, in a table whose JSON
    column is named json_diff, updated whole (no PARTIAL_JSON): not flagged, synced alike."""
    setup = [
        "DROP DATABASE IF EXISTS pjl",
        "CREATE DATABASE pjl",
        "CREATE TABLE pjl.u (id INT PRIMARY KEY, json_diff JSON, doc JSON, w VARCHAR(100), b BLOB)",
    ]
    got = _both(
        spark,
        mysql,
        tmp_path,
        setup,
        [
            "SET SESSION binlog_row_image = 'MINIMAL'",
            f"INSERT INTO pjl.u VALUES (1, '{LOOKALIKE}', '{LOOKALIKE}', 'a', 'b')",
            f"UPDATE pjl.u SET json_diff = '[1]', doc = '{LOOKALIKE}', w = '{LOOKALIKE}', b = '{LOOKALIKE}'",
            f"UPDATE pjl.u SET json_diff = '{LOOKALIKE}'",
        ],
    )
    (row,) = got["pjl.u"]
    assert json.loads(row["json_diff"]) == json.loads(row["doc"]) == json.loads(LOOKALIKE)
    assert row["w"] == LOOKALIKE and row["b"] == LOOKALIKE.encode()


@pytest.mark.slow
@pytest.mark.parametrize("reads", ["tasks", "driver"])
def test_stream_refuses_from_the_micro_batch_flag(
    spark: Any, partial_source: str, tmp_path: Path, reads: str
) -> None:
    """A followed source's micro-batch (read by tasks or decoded on the driver) has ``json_edits``
    and is refused from it before anything is created."""
    from binlake.spark.apply import apply_changes, stream_changes

    target, columns = tmp_path / "lake", []

    def apply(batch: Any) -> Any:
        columns.append(batch.columns)
        return apply_changes(batch, target, source=partial_source)

    with pytest.raises(Exception, match="column json_col: a partial JSON update"):
        stream_changes(spark, partial_source, tmp_path / "ckpt", apply, options={"reads": reads})
    assert columns and all(c[-3:] == ["changes", "partial", "json_edits"] for c in columns)
    assert not target.exists()
