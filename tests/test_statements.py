"""The one classification of Query events: every statement of the real corpus, concrete statements
read from real binlogs, identifier quoting round-trips, and the consumers (transactions, schema
history, renames, selections, SQL output) agreeing on the same statements."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlake import decoder as decoder_module
from binlake.errors import BinlogError
from binlake.events.base import Event, EventHeader
from binlake.events.control import XaPrepare
from binlake.events.query import Query
from binlake.events.types import EventType
from binlake.filters import Selection, statement_databases
from binlake.render.sql import redo_statements
from binlake.schema.history import SchemaHistory
from binlake.schema.renames import TableDrop, TableRename, renames_in
from binlake.series import BinlogSeries
from binlake.statements import Ddl, Kind, Statement, XaId, classify, xa_canonical
from binlake.txn import COMMIT, DDL, Transaction, TransactionGrouper
from tests.conftest import CORPUS, corpus_index

RECORDS = [r for r in corpus_index()["records"] if r.get("events")]


def _queries(path: Path) -> list[tuple[int, Query]]:
    out = []
    try:
        for _, ev in BinlogSeries.open(path).events(verify_checksum=False, require_fde=False):
            if isinstance(ev.body, Query):
                out.append((ev.offset, ev.body))
    except BinlogError:
        pass  # the corpus holds damaged files on purpose: what was read before the damage counts
    return out


def test_every_query_event_of_the_corpus_is_classified(corpus: Path) -> None:
    if not RECORDS:
        pytest.skip(f"no corpus index at {CORPUS}")
    kinds: dict[Kind, int] = {}
    for rec in RECORDS:
        for offset, q in _queries(corpus / rec["path"]):
            s = classify(q.query, q.database)
            where = f"{rec['path']}:{offset}: {q.query[:80]!r}"
            assert s.kind is not Kind.UNKNOWN, where
            assert (s.ddl is not None) == (s.kind is Kind.DDL), where
            assert all(db and name for db, name in s.tables) or not q.database, where
            if s.kind.value.startswith("xa_"):
                assert s.xid is not None, where
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
    assert kinds[Kind.BEGIN] > 500 and kinds[Kind.DDL] > 500 and kinds[Kind.DML] > 300, kinds
    assert {Kind.SAVEPOINT, Kind.ROLLBACK_TO_SAVEPOINT, Kind.XA_START, Kind.XA_COMMIT} <= set(kinds)


def _real(corpus: Path, path: str, offset: int) -> tuple[Query, Statement]:
    found = dict(_queries(corpus / path))
    q = found[offset]
    return q, classify(q.query, q.database)


# (file, offset of the Query event) -> what its statement is (real statements of the corpus)
REAL = [
    (  # two tables, a server comment, no IF EXISTS
        "alibaba-canal/parse/tsdb/mysql-bin.000003", 9087,
        dict(kind=Kind.DDL, ddl=Ddl.DROP_TABLE, tables=(("tsdb", "canal_table_meta_history"),
                                                        ("tsdb", "canal_table_meta_snapshot"))),
    ),
    (  # a qualified table in another database than the default one
        "alibaba-canal/parse/tsdb/mysql-bin.000002", 4367,
        dict(ddl=Ddl.DROP_TABLE, tables=(("local", "wanshao_test"),), databases=("local",)),
    ),
    (
        "mysql-server-8.0.39/std_data/bug33029-slave-relay-bin.000001", 236,
        dict(ddl=Ddl.DROP_TABLE, tables=(("test", "t1"), ("test", "t2"))),
    ),
    (  # versioned comments: IF NOT EXISTS inside one, a charset option in another
        "zalora-binlog-parser/gtid-fixtures/mysql-bin.01", 259,
        dict(ddl=Ddl.CREATE_DATABASE, tables=(), databases=("test_db",)),
    ),
    (
        "mariadb-server-10.3/std_data/mdev6020-mysql-bin.000001", 350,
        dict(ddl=Ddl.CREATE_DATABASE, databases=("test",)),
    ),
    (  # ALGORITHM=, DEFINER=`u`@`h`, SQL SECURITY before VIEW
        "osheroff-mysql-binlog-connector-java/mysql-bin.sakila", 11665,
        dict(ddl=Ddl.VIEW, tables=(("sakila", "customer_list"),)),
    ),
    (  # ANSI_QUOTES: DEFINER="root"@"localhost"
        "mysql-server-8.0.39/std_data/bug27213339-bin.000001", 978,
        dict(ddl=Ddl.TRIGGER, tables=(("db1", "t1"),), databases=("db1",)),
    ),
    (  # partition maintenance: the comma lists partitions, the layout stays
        "mysql-server-8.0.39/zip-extracted/upgrade/discarded_partition_data_8020/data_upgrade/binlog.000002", 1409,
        dict(ddl=Ddl.ALTER_TABLE, tables=(("partitions", "t2"),), layout_neutral=True),
    ),
    (
        "mysql-server-8.0.39/std_data/rpl_cross_version_default_utf8mb4_collation.000001", 1295,
        dict(ddl=Ddl.ALTER_TABLE, tables=(("test", "foobar"),), renames_columns=True, layout_neutral=False),
    ),
    ("mysql-server-8.0.39/std_data/binlog_savepoint.000001", 412, dict(kind=Kind.SAVEPOINT)),
    ("mysql-server-8.0.39/std_data/binlog_savepoint.000001", 702, dict(kind=Kind.ROLLBACK_TO_SAVEPOINT)),
    (
        "mysql-server-8.0.39/suite/binlog/std_data/ver_trunk_row_v2.001", 151433,
        dict(kind=Kind.DML, tables=(("test", "t3"),)),
    ),
    (  # a table named like a keyword
        "mysql-server-8.0.39/std_data/binlog_56_gtid_reserved_word.000001", 356,
        dict(ddl=Ddl.CREATE_TABLE, tables=(("test", "GENERATED"),)),
    ),
    (
        "mariadb-server-10.3/std_data/rpl/master-bin-seq_10.3.36.000001", 1134,
        dict(ddl=Ddl.SEQUENCE, tables=(("test", "s1"),)),
    ),
    (  # statement format: dots inside strings are not databases
        "mysql-server-8.0.39/std_data/corrupt-relay-bin.000624", 8252,
        dict(kind=Kind.DML, tables=(("RELATE", "ITEM"),), databases=("RELATE",)),
    ),
    (
        "polardb-polardbx-cdc/polardbx-cdc-task/mysql_bin.1", 189,
        dict(kind=Kind.XA_START, xid=XaId(1, b"drds-1881c1536f401000@9d11c57d194702f4", b"D1_P00000_GROUP@0000")),
    ),
    (
        "mysql-server-8.0.39/std_data/binlog_recovery/duplicate_xid_xa_rollback.000001", 1057,
        dict(kind=Kind.XA_ROLLBACK, xid=XaId(1, b"x", b"")),
    ),
]  # fmt: skip


@pytest.mark.parametrize("path,offset,expected", REAL, ids=[f"{p}:{o}" for p, o, _ in REAL])
def test_real_statements(corpus: Path, path: str, offset: int, expected: dict) -> None:
    if not (corpus / path).exists():
        pytest.skip(f"{path} is not in this corpus")
    _, s = _real(corpus, path, offset)
    if "ddl" in expected:
        assert s.kind is Kind.DDL
    for field, value in expected.items():
        assert getattr(s, field) == value, field


def test_the_typed_xa_prepare_event_and_the_xa_statements_name_one_id(corpus: Path) -> None:
    """The XA_PREPARE event's binary id and the XA COMMIT statement's text id are the same XaId."""
    path = corpus / "mysql-server-8.0.39/std_data/binlog_recovery/duplicate_xid_xa_commit.000001"
    events = [ev for _, ev in BinlogSeries.open(path).events(verify_checksum=False)]
    prep = next(e.body for e in events if isinstance(e.body, XaPrepare))
    commits = [classify(e.body.query) for e in events if isinstance(e.body, Query)]
    ids = {s.xid for s in commits if s.kind in (Kind.XA_START, Kind.XA_COMMIT)}
    assert ids == {XaId(prep.format_id, prep.gtrid, prep.bqual)}


@pytest.mark.parametrize(
    "sql,kind,xid,one_phase",
    [
        ("XA START 'a''b','c',3", Kind.XA_START, XaId(3, b"a'b", b"c"), False),
        ("XA BEGIN 0x6162", Kind.XA_START, XaId(1, b"ab", b""), False),
        ("xa end X'78',X'',1 SUSPEND", Kind.XA_END, XaId(1, b"x", b""), False),
        ("XA COMMIT X'78',X'79',7 ONE PHASE", Kind.XA_COMMIT, XaId(7, b"x", b"y"), True),
        ("XA PREPARE 'g', b'01100001'", Kind.XA_PREPARE, XaId(1, b"g", b"a"), False),
    ],
)
def test_xa_ids(sql: str, kind: Kind, xid: XaId, one_phase: bool) -> None:
    s = classify(sql)
    assert (s.kind, s.xid, s.one_phase) == (kind, xid, one_phase)
    assert classify(f"XA COMMIT {s.xid}").xid == xid  # str() prints what the statement reads back


@given(
    verb=st.sampled_from(["START", "BEGIN", "END", "PREPARE", "COMMIT", "ROLLBACK"]),
    gtrid=st.binary(max_size=64),
    bqual=st.binary(max_size=64),
    format_id=st.integers(0, 2**31 - 1),
    one_phase=st.booleans(),
)
def test_the_canonical_xa_fast_path_reads_what_the_tokenizer_reads(
    verb: str, gtrid: bytes, bqual: bytes, format_id: int, one_phase: bool
) -> None:
    """XA statements as servers write them skip the tokenizer: the same Statement either way (an
    extra blank sends the text through the tokenizer)."""
    sql = f"XA {verb} X'{gtrid.hex()}',X'{bqual.hex()}',{format_id}{' ONE PHASE' if one_phase else ''}"
    fast = classify(sql)
    assert fast == classify(sql.replace("XA ", "XA  ", 1))
    assert (fast.xid, fast.one_phase) == (XaId(format_id, gtrid, bqual), one_phase)


@pytest.mark.parametrize(
    "sql,kind,ddl",
    [
        ("begin", Kind.BEGIN, None),
        ("START TRANSACTION READ ONLY", Kind.BEGIN, None),
        ("COMMIT /* implicit, from Xid_log_event */", Kind.COMMIT, None),
        ("ROLLBACK WORK TO SAVEPOINT s", Kind.ROLLBACK_TO_SAVEPOINT, None),
        ("RELEASE SAVEPOINT `s`", Kind.RELEASE_SAVEPOINT, None),
        ("  -- a comment\n# another\n/* and one more */ INSERT INTO t VALUES (1)", Kind.DML, None),
        ("/*!40000 ALTER TABLE `t` DISABLE KEYS */", Kind.DDL, Ddl.ALTER_TABLE),
        ("CREATE OR REPLACE TABLE t (a INT)", Kind.DDL, Ddl.CREATE_TABLE),
        ("CREATE UNIQUE INDEX i ON d.t (a)", Kind.DDL, Ddl.CREATE_INDEX),
        ("DROP INDEX i ON t", Kind.DDL, Ddl.DROP_INDEX),
        ("CREATE DEFINER=CURRENT_USER() PROCEDURE p() SELECT 1", Kind.DDL, Ddl.ROUTINE),
        ("OPTIMIZE NO_WRITE_TO_BINLOG TABLE t1, t2", Kind.DDL, Ddl.MAINTENANCE),
        ("SET PASSWORD FOR u = 'x'", Kind.DDL, Ddl.ACCOUNT),
        ("SET @a = 1", Kind.SET, None),
        ("CREATE TABLESPACE ts ADD DATAFILE 'ts.ibd'", Kind.DDL, Ddl.OTHER),
        ("", Kind.UNKNOWN, None),
        ("(", Kind.UNKNOWN, None),
    ],
)
def test_kinds(sql: str, kind: Kind, ddl: Ddl | None) -> None:
    s = classify(sql, "db")
    assert (s.kind, s.ddl) == (kind, ddl)


def test_tables_and_renames() -> None:
    s = classify("DROP TEMPORARY TABLE IF EXISTS a, `d`.`b` RESTRICT", "db")
    assert (s.ddl, s.temporary, s.tables) == (Ddl.DROP_TABLE, True, (("db", "a"), ("d", "b")))
    s = classify("RENAME TABLE a TO b, x.`b c` TO `a`, d.e TO f.g", "db")
    assert s.renames == (
        (("db", "a"), ("db", "b")),
        (("x", "b c"), ("db", "a")),
        (("d", "e"), ("f", "g")),
    )
    assert s.databases == ("db", "x", "d", "f")
    s = classify("ALTER TABLE d.t ADD COLUMN x INT, RENAME AS t2, ALGORITHM=INPLACE", "db")
    assert (s.tables, s.renames, s.layout_neutral) == (
        (("d", "t"), ("db", "t2")),
        ((("d", "t"), ("db", "t2")),),
        False,
    )
    s = classify("ALTER TABLE t ENGINE=InnoDB, COMMENT 'a, b', ADD INDEX i (a, b)", "db")
    assert s.layout_neutral and s.actions == ("ENGINE", "COMMENT", "ADD INDEX")
    s = classify("CREATE TRIGGER d.tr AFTER UPDATE ON t FOR EACH ROW SET @x = 1", "db")
    assert (s.tables, s.databases) == ((("d", "t"),), ("d",))  # a trigger's table is in its database


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


NAMES = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12
)


@settings(max_examples=300, deadline=None)
@given(
    db=NAMES, a=NAMES, b=NAMES, comment=st.sampled_from(["", "/* c */ ", "-- c\n", "# c\n", "/*!50100 */"])
)
def test_quoted_names_round_trip(db: str, a: str, b: str, comment: str) -> None:
    """Backquotes, dots, spaces, quotes, unicode: every name comes back as it was, qualified or not."""
    qa, qb, qdb = _quoted(a), _quoted(b), _quoted(db)
    cases = {
        f"{comment}DROP TABLE IF EXISTS {qdb}.{qa}, {qb}": ((db, a), ("dflt", b)),
        f"{comment}TRUNCATE TABLE {qdb} . {qa}": ((db, a),),
        f"{comment}CREATE TEMPORARY TABLE {qa} (x INT)": (("dflt", a),),
        f"{comment}INSERT INTO {qdb}.{qb} VALUES (1)": ((db, b),),
    }
    for sql, tables in cases.items():
        assert classify(sql, "dflt").tables == tuple(dict.fromkeys(tables)), sql
    s = classify(f"{comment}RENAME TABLE {qa} TO {qdb}.{qb}", "dflt")
    assert s.renames == ((("dflt", a), (db, b)),)
    s = classify(f"ALTER TABLE {qdb}.{qa} RENAME TO {qb}", "dflt")
    assert s.renames == (((db, a), ("dflt", b)),)
    if "\\" not in a:  # ANSI_QUOTES names (a backslash would read as a string literal's escape)
        ansi = '"' + a.replace('"', '""') + '"'
        assert classify(f"DROP VIEW {ansi}", "dflt").tables == (("dflt", a),)


SQL_WORDS = ["CREATE", "ALTER", "DROP", "TABLE", "XA", "START", "X'7", "'a", "`b", '"c', "/*!", "*/", "/*",
             "--", "#", "\n", ",", ".", "(", ")", "IF", "EXISTS", "RENAME", "TO", "DEFINER", "=", "@", "ON", "INTO"]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(), st.lists(st.sampled_from(SQL_WORDS) | st.text(max_size=3)).map(" ".join)))
def test_classify_never_raises(text: str) -> None:
    s = classify(text, "db")
    assert isinstance(s.kind, Kind) and all(len(t) == 2 for t in s.tables)


# --- the consumers agree ---------------------------------------------------------------------------


def _event(sql: str, db: str, offset: int = 4) -> Event:
    return Event(
        EventHeader(0, EventType.QUERY, 1, 100, offset + 100, 0), Query(1, 0, 0, db, sql), "f", offset
    )


def _transaction(sql: str, db: str) -> Transaction:
    (t,) = TransactionGrouper().feed(0, _event(sql, db))
    return t


SEED = "CREATE TABLE d.t (a INT); CREATE TABLE d.u (a INT); CREATE TABLE e.a (a INT);\n"


def _history() -> SchemaHistory:
    return SchemaHistory.from_ddl_script(SEED.replace("; ", ";\n"))


@pytest.mark.parametrize(
    "sql,catalog_after,follows",
    [
        # rows gone without row events: the layout stays; the change log drops and starts anew
        ("TRUNCATE TABLE d.t", {("d", "t"), ("d", "u"), ("e", "a")}, [TableDrop(("d", "t"))]),
        ("/* x */ TRUNCATE d.t", {("d", "t"), ("d", "u"), ("e", "a")}, [TableDrop(("d", "t"))]),
        (
            "DROP TABLE IF EXISTS a, d.t /* generated by server */",
            {("d", "u")},
            [TableDrop(("e", "a")), TableDrop(("d", "t"))],
        ),
        (
            "RENAME TABLE d.t TO d.t2, d.u TO x.u, a TO d.a",
            {("d", "t2"), ("x", "u"), ("d", "a")},
            [
                TableRename(("d", "t"), ("d", "t2")),
                TableRename(("d", "u"), ("x", "u")),
                TableRename(("e", "a"), ("d", "a")),
            ],
        ),
        # an unqualified new name is in the default database (MariaDB 10.11 does so)
        (
            "ALTER TABLE d.t RENAME TO t3",
            {("e", "t3"), ("d", "u"), ("e", "a")},
            [TableRename(("d", "t"), ("e", "t3"))],
        ),
        ("DROP TEMPORARY TABLE x", {("d", "t"), ("d", "u"), ("e", "a")}, []),
    ],
)
def test_consumers_agree(sql: str, catalog_after: set, follows: list) -> None:
    st_ = classify(sql, "e")
    t = _transaction(sql, "e")
    assert t.kind == DDL
    h = _history()
    assert h.apply(sql, "e", ("f", 4)) and set(h.catalog) == catalog_after
    assert renames_in(sql, "e") == follows
    named = {db for db, _ in st_.tables}
    assert statement_databases(t.events[0].body) == named | {"e"}
    for db in named:  # a selection of any database it names keeps the statement
        assert Selection(databases=[db]).keeps(t)
    assert not Selection(databases=["zz"]).keeps(t)
    assert redo_statements(t)[0] == "USE `e`;"


def test_consumers_agree_on_statements_that_are_not_ddl() -> None:
    t = _transaction("/* app */ INSERT INTO d.t VALUES (1)", "e")
    assert t.kind == COMMIT  # statement-format data, not DDL, even behind a comment
    assert redo_statements(t) == []
    h = _history()
    assert h.apply("/* app */ INSERT INTO d.t VALUES (1)", "e", ("f", 4)) and not h.changes
    g = TransactionGrouper()
    feed = [
        g.feed(0, _event(q, "e", 4 + 100 * i))
        for i, q in enumerate(["BEGIN", "TRUNCATE d.t", "SAVEPOINT s", "COMMIT"])
    ]
    assert [len(x) for x in feed] == [0, 0, 0, 1] and feed[-1][0].kind == COMMIT  # inside BEGIN: goes on


def test_database_ddl_is_told_apart_for_sql_output() -> None:
    for sql in (
        "CREATE DATABASE /*!32312 IF NOT EXISTS*/ `x`",
        "DROP SCHEMA x",
        "ALTER DATABASE x CHARSET utf8mb4",
    ):
        t = _transaction(sql, "x")
        assert redo_statements(t) == [sql + ";"]  # no USE of a database that may not exist
        assert statement_databases(t.events[0].body) == {"x"}


def _cpu_us(sql: str, n: int) -> float:
    start = time.process_time()  # CPU time: the test machine is shared
    for _ in range(n):
        classify(sql, "db")
    return (time.process_time() - start) / n * 1e6


def test_statement_classification_is_fast() -> None:
    """It runs on every Query event: BEGIN is a dict lookup, a statement's head a few tokens (its
    length does not matter), and only an ALTER TABLE is read to its end."""
    alter = "ALTER TABLE `t` ADD COLUMN c INT, " + ", ".join(f"ADD INDEX i{i} (a)" for i in range(20))
    measured = {
        "begin": _cpu_us("BEGIN", 20_000),
        "commit_with_comment": _cpu_us("COMMIT /* implicit, from Xid_log_event */", 5_000),
        "insert_1MB": _cpu_us("INSERT INTO t VALUES (" + "1," * 500_000 + "1)", 2_000),
        "alter_21_actions": _cpu_us(alter, 200),
    }
    print(json.dumps({k: round(v, 2) for k, v in measured.items()}))
    assert measured["begin"] < 2 and measured["commit_with_comment"] < 50
    assert measured["insert_1MB"] < 200 and measured["alter_21_actions"] < 5_000


# --- the canonical XA form read without the tokenizer: the string reader and the compiled one ------

_XA_FORM = re.compile(
    r"XA (START|BEGIN|END|PREPARE|COMMIT|ROLLBACK) X'((?:[0-9a-fA-F]{2})*)',X'((?:[0-9a-fA-F]{2})*)',"
    r"(0|[1-9][0-9]{0,9})( ONE PHASE)?"
)  # the form as the module's comment writes it: the reference both readers are held to
_XA_VERB_KINDS = {
    "START": Kind.XA_START, "BEGIN": Kind.XA_START, "END": Kind.XA_END, "PREPARE": Kind.XA_PREPARE,
    "COMMIT": Kind.XA_COMMIT, "ROLLBACK": Kind.XA_ROLLBACK,
}  # fmt: skip
_XA_PARTS = ["XA ", "START ", "END ", "COMMIT ", "BEGIN", "X'", "x'", "'", ",", "0", "1", "01", "9999999999",
             "12345678901", "ab", "AB", "a", "g0", " ", "  ", " ONE PHASE", "ONE PHASE", "\u0661", "\u00b2",
             "ｆｆ", "\n", "-1"]  # fmt: skip


def _xa_reference(query: str) -> tuple[Kind, XaId, bool] | None:
    m = _XA_FORM.fullmatch(query)
    if m is None:
        return None
    return _XA_VERB_KINDS[m[1]], XaId(int(m[4]), bytes.fromhex(m[2]), bytes.fromhex(m[3])), m[5] is not None


_xa_texts = st.one_of(
    st.builds(
        lambda verb, g, b, f, one: f"XA {verb} X'{g.hex()}',X'{b.hex()}',{f}{' ONE PHASE' if one else ''}",
        st.sampled_from(sorted(_XA_VERB_KINDS)), st.binary(max_size=70), st.binary(max_size=70),
        st.integers(0, 2**32 + 5), st.booleans(),
    ),
    st.lists(st.sampled_from(_XA_PARTS), max_size=12).map("".join),
    st.lists(st.sampled_from(_XA_PARTS), max_size=12).map(lambda p: "XA START X'61',X'',1" + "".join(p)),
    st.text(max_size=40).map(lambda t: "XA COMMIT " + t),
)  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(_xa_texts)
def test_xa_canonical_reads_exactly_the_form(text: str) -> None:
    """``xa_canonical`` (string operations) accepts what the form's regular expression accepts, with
    the same result; the compiled reader (from the statement's bytes) too, or leaves it to it."""
    expected = _xa_reference(text)
    assert xa_canonical(text) == expected
    fastenv = decoder_module.ENVELOPE.built
    if fastenv is not None:
        raw = b"\x00\x01" + text.encode("utf-8", "surrogateescape") + b"\x02"
        assert fastenv.xa_statement(raw, 2, len(raw) - 1) == expected
        without_end_id = fastenv.xa_statement(raw, 2, len(raw) - 1, False)  # the node loop's call
        if expected is not None and expected[0] is Kind.XA_END:
            expected = (Kind.XA_END, None, expected[2])
        assert without_end_id == expected


def test_the_compiled_xa_reader_checks_its_range() -> None:
    fastenv = decoder_module.ENVELOPE.built
    if fastenv is None:
        pytest.skip("the compiled envelope is not built")
    raw = b"XA END X'61',X'',1"
    assert fastenv.xa_statement(raw, 0, len(raw))[1] == XaId(1, b"a", b"")
    for start, end in ((0, len(raw) + 1), (-1, len(raw)), (0, len(raw) - 1), (1, len(raw))):
        assert fastenv.xa_statement(raw, start, end) is None
