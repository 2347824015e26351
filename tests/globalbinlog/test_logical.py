"""Issue #17 items 9 and 10: the global binlog shows logical tables (physical shard tables mapped by a
map file or the PolarDB-X naming rule, hidden shard columns dropped) and one DDL per logical change;
checked on the WRITTEN global binlog read back by binlake and mariadb-binlog."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.globalbinlog.changelog import global_row_changes
from binlake.globalbinlog.logical import (
    IMPLICIT_ID,
    LogicalMapError,
    LogicalNames,
    LogicalView,
    Target,
    parse_map,
    polardbx_name,
    rename_tables,
)
from binlake.globalbinlog.merge import merge_nodes
from binlake.globalbinlog.output import write_binlog
from binlake.series import BinlogSeries
from binlake.shardsim import ScriptedCluster, physical_table, simulate
from binlake.txn import COMMIT, DDL, UNFINISHED, iter_transactions
from binlake.values.columns import ColumnDef
from binlake.values.types import ColumnType

needs_mariadb_binlog = pytest.mark.skipif(
    shutil.which("mariadb-binlog") is None,
    reason="mariadb-binlog is not installed (apt-get install mariadb-client)",
)


def read_back(files: list[Path]) -> list:  # type: ignore[type-arg]
    return [t for t in iter_transactions(BinlogSeries.open(*files).events()) if t.kind != UNFINISHED]


def table_maps(files: list[Path]) -> Counter[tuple[str, str, int]]:
    return Counter(
        (e.body.database, e.body.table, len(e.body.columns))
        for t in read_back(files)
        for e in t.events
        if isinstance(e.body, TableMap)
    )


# ---- the rules -----------------------------------------------------------------------------------


def test_polardbx_naming_rule_on_the_corpus_names() -> None:
    assert polardbx_name("d1_p00000", "t_jg_tag_ynub") == Target("d1", "t_jg_tag", (IMPLICIT_ID,), True)
    assert polardbx_name("d1_p00000", "t_user_jg_tag_ubv7").table == "t_user_jg_tag"  # type: ignore[union-attr]
    got = polardbx_name("filestoragestatisticcrosstest_p00000", "statistic_test0_oss_KdHH_00002")
    assert got is not None and (got.database, got.table) == (
        "filestoragestatisticcrosstest",
        "statistic_test0_oss",
    )
    # only in a physical database: a logical name that merely ends in four letters stays itself
    assert polardbx_name("shop", "user_name") is None
    assert polardbx_name("d1_p00003", "plain") == Target("d1", "plain", (IMPLICIT_ID,), True)


def test_map_file_format_and_its_errors() -> None:
    rules = parse_map(
        """
        # physical            logical       drop
        d1_p*.t_jg_tag_*      d1.t_jg_tag
        `legacy_0`.acct_?     bank.acct     drop=_drds_implicit_id_,@3
        """
    )
    assert [(r.physical_db, r.physical_table, r.target) for r in rules] == [
        ("d1_p*", "t_jg_tag_*", Target("d1", "t_jg_tag")),
        ("legacy_0", "acct_?", Target("bank", "acct", ("_drds_implicit_id_", 3))),
    ]
    names = LogicalNames(rules)
    assert names.target("d1_p00007", "t_jg_tag_ynub") == Target("d1", "t_jg_tag")
    assert names.target("d1_p00007", "other") is None and names.target("legacy_0", "acct_12") is None
    for bad in ("just_one_word", "a.b c", "a.b c.d keep=x", "a.b c.d drop=@0"):
        with pytest.raises(LogicalMapError, match="line 1"):
            parse_map(bad)


def _tm(names: bool) -> TableMap:
    cols = [
        ColumnDef(i, ColumnType.LONGLONG, 0, False, name=n if names else None)
        for i, n in enumerate(["id", "_drds_implicit_id_", "v"])
    ]
    return TableMap(9, 1, "db_p00001", "t_ab12_00001", cols, primary_key=[1])


def test_hidden_columns_by_name_or_position() -> None:
    derived = LogicalNames(derive=True)
    tm, dropped = derived.table_map(_tm(names=True))
    assert (tm.database, tm.table, [c.name for c in tm.columns], dropped) == ("db", "t", ["id", "v"], (1,))
    assert [c.index for c in tm.columns] == [0, 1] and tm.primary_key == []
    # MySQL 5.7 names no columns: the rule's default drops nothing, a map must say @N
    tm, dropped = derived.table_map(_tm(names=False))
    assert (len(tm.columns), dropped) == (3, ())
    with pytest.raises(LogicalMapError, match="by position"):
        LogicalNames(parse_map("db_p*.* db.t drop=_drds_implicit_id_")).table_map(_tm(names=False))
    tm, dropped = LogicalNames(parse_map("db_p*.* db.t drop=@2")).table_map(_tm(names=False))
    assert (len(tm.columns), dropped) == (2, (1,))
    with pytest.raises(LogicalMapError, match="cannot drop @4"):
        LogicalNames(parse_map("db_p*.* db.t drop=@4")).table_map(_tm(names=False))


def test_ddl_text_names_tables_only_where_sql_names_tables() -> None:
    names = LogicalNames(derive=True)
    db = "d1_p00002"
    assert (
        rename_tables(
            "ALTER TABLE t_ab12_00002 ADD COLUMN user_name INT, ADD INDEX ix (user_name)", db, names
        )
        == "ALTER TABLE `t` ADD COLUMN user_name INT, ADD INDEX ix (user_name)"
    )
    assert rename_tables("ANALYZE TABLE `t_ab12_00002`, u_cd34_00002", db, names) == "ANALYZE TABLE `t`, `u`"
    assert (
        rename_tables("RENAME TABLE t_ab12_00002 TO t2_ab12_00002", db, names) == "RENAME TABLE `t` TO `t2`"
    )
    assert (
        rename_tables(
            "CREATE INDEX i ON `d1_p00002`.`t_ab12_00002` (c) COMMENT 'TABLE x_ab12_00002'", db, names
        )
        == "CREATE INDEX i ON `d1`.`t` (c) COMMENT 'TABLE x_ab12_00002'"
    )
    assert rename_tables("DROP TABLE IF EXISTS t_ab12_00002", db, names) == "DROP TABLE IF EXISTS `t`"


# ---- the corpus ----------------------------------------------------------------------------------


def test_corpus_alisql_branch_comes_out_as_logical_tables(corpus: Path, tmp_path: Path) -> None:
    """polardbx-cdc-task/mysql_bin.1: a branch on ``d1_p00000.t_jg_tag_ynub`` and
    ``d1_p00000.t_user_jg_tag_ubv7`` is written as ``d1.t_jg_tag`` / ``d1.t_user_jg_tag``."""
    path = corpus / "polardb-polardbx-cdc/polardbx-cdc-task/mysql_bin.1"
    out, _ = merge_nodes([[path]], view=LogicalView(LogicalNames(derive=True)))
    files = write_binlog(out, tmp_path / "g")
    assert {(db, t) for db, t, _ in table_maps(files)} == {("d1", "t_jg_tag"), ("d1", "t_user_jg_tag")}
    (t,) = read_back(files)
    rows = [e.body for e in t.events if isinstance(e.body, Rows)]
    assert [(r.table.database, r.table.table) for r in rows if r.table] == [("d1", "t_jg_tag")]
    after = rows[0].rows[0][1]
    assert after is not None and after[2] == 1  # the row itself is untouched
    if shutil.which("mariadb-binlog"):
        text = subprocess.run(["mariadb-binlog", "-vv", str(files[0])], capture_output=True, text=True).stdout
        assert "### UPDATE `d1`.`t_jg_tag`" in text and "d1_p00000" not in text


def test_corpus_physical_ddls_of_one_logical_statement_collapse(corpus: Path, tmp_path: Path) -> None:
    """polardbx-cdc-canal/mysql_bin.19_1: ANALYZE TABLE on partitions 00000, 00002, 00004 of
    ``statistic_test0_oss``; the last two carry one snapshot GCN and are one logical statement;
    the first one's GCN is before the fragment begins (its TSO is unknown: kept apart)."""
    path = corpus / "polardb-polardbx-cdc/polardbx-cdc-canal/mysql_bin.19_1"
    view = LogicalView(LogicalNames(derive=True))
    out, _ = merge_nodes([[path]], require_fde=False, view=view)
    files = write_binlog(out, tmp_path / "g")
    ddls = [t for t in read_back(files) if t.kind == DDL]
    queries = [e.body for t in ddls for e in t.events if isinstance(e.body, Query)]
    assert [(q.database, q.query) for q in queries] == [
        ("filestoragestatisticcrosstest", "ANALYZE TABLE `statistic_test0_oss`")
    ] * 2
    assert view.ddl.collapsed == 1


# ---- simulated clusters --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """4 nodes x 2 partitions of ``db.acct`` with PolarDB-X's hidden primary key, merged with the
    naming rule and written."""
    root = tmp_path_factory.mktemp("logical")
    res = simulate(
        root / "nodes",
        seed=5,
        transactions=250,
        nodes=4,
        pending_at_end=0,
        shard_tables=True,
        implicit_id=True,
    )
    out, _ = merge_nodes(res.node_files, view=LogicalView(LogicalNames(derive=True)))
    files = write_binlog(out, root / "global", max_file_size=30_000)
    return res, out, files


def test_a_sharded_table_is_one_logical_table_in_the_written_global_binlog(sharded) -> None:  # type: ignore[no-untyped-def]
    res, out, files = sharded
    phys = {
        e.body.table
        for f in res.node_files
        for t in read_back(f)
        for e in t.events
        if isinstance(e.body, TableMap)
    }
    assert len(phys - {"__cdc_heartbeat__"}) == 8  # eight physical tables went in
    assert set(table_maps(files)) == {("db", "acct", 2)}  # one logical table, two columns, came out
    ids = {
        (str(f), e.body.table_id)
        for f in files
        for t in read_back([f])
        for e in t.events
        if isinstance(e.body, TableMap)
    }
    assert len(ids) == len(files)  # one table id per file: one table
    # every transfer whole, in order, on the logical rows: the replay and the bank total hold
    balance = dict.fromkeys(range(1, 61), 1000)
    for t in read_back(files):
        for e in t.events:
            if isinstance(e.body, Rows):
                for before, after in e.body.rows:
                    assert before is not None and after is not None
                    assert len(before) == len(after) == 2 and balance[before[0]] == before[1]
                    balance[after[0]] = after[1]
    assert sum(balance.values()) == res.total  # (not per transaction: XA without TSO is split by design)
    assert balance == {a: res.balances.get(a, 1000) for a in balance}


def test_the_change_log_sees_the_logical_table(sharded) -> None:  # type: ignore[no-untyped-def]
    _, out, _ = sharded
    changes = list(global_row_changes(out))
    assert {(c.db, c.table) for c in changes} == {("db", "acct")}
    assert {len(c.before or ()) for c in changes} == {2}


@needs_mariadb_binlog
def test_mariadb_binlog_reads_the_logical_global_binlog(sharded) -> None:  # type: ignore[no-untyped-def]
    _, out, files = sharded
    text = subprocess.run(
        ["mariadb-binlog", "-vv", *map(str, files)], capture_output=True, text=True, check=True
    ).stdout
    rows = sum(len(r.rows) for g in out if g.kind != "HEARTBEAT" for p in g.pieces for r in p.rows)
    assert text.count("### UPDATE `db`.`acct`") == rows
    assert "db_p0" not in text and "@3=" not in text  # no physical name, no hidden column


def test_merge_cli_with_a_map_file(tmp_path: Path) -> None:
    from binlake.cli import main

    res = simulate(tmp_path / "nodes", seed=8, transactions=60, nodes=2, pending_at_end=0, shard_tables=True)
    (tmp_path / "map").write_text("db_p*.acct_k3Zq_*   bank.accounts\n")
    nodes = [a for files in res.node_files for a in ("--node", str(files[0].parent))]
    assert (
        main(["merge", "--final", *nodes, "-o", str(tmp_path / "g"), "--logical-map", str(tmp_path / "map")])
        == 0
    )
    files = BinlogSeries.open(tmp_path / "g" / "binlog.index").files
    assert set(table_maps(files)) == {("bank", "accounts", 2)}


@pytest.mark.parametrize("carrier", ["sequence80", "gcn105", "qstatus200"])
def test_one_ddl_per_logical_change(tmp_path: Path, carrier: str) -> None:
    """Item 10: a DDL run on all 4 partitions (2 nodes x 2 groups), between transfers, twice (two
    logical changes with the same text), plus one without a TSO twice: four logical DDLs come out,
    each where its first physical DDL was, with logical names."""
    c = ScriptedCluster(tmp_path / "nodes", nodes=2, carrier=carrier, shard_tables=True)
    transfer = [(0, "G0", {1: -5}), (1, "G1", {2: 5})]
    c.two_phase_commit(c.txn("GLOBAL_TSO", transfer))
    c.ddl("ALTER TABLE {table} ADD INDEX ix_bal (bal)")
    c.two_phase_commit(c.txn("GLOBAL_TSO", transfer))
    c.ddl("ALTER TABLE {table} ADD INDEX ix_bal (bal)")
    c.ddl("ANALYZE TABLE {table}", tso=False)
    c.ddl("ANALYZE TABLE {table}", tso=False)
    c.two_phase_commit(c.txn("GLOBAL_TSO", transfer))
    res = c.finish()
    view = LogicalView(LogicalNames(derive=True))
    out, _ = merge_nodes(res.node_files, view=view)
    files = write_binlog(out, tmp_path / "g")
    kinds = [
        (t.kind, [e.body.query for e in t.events if isinstance(e.body, Query) and t.kind == DDL])
        for t in read_back(files)
    ]
    add = ["ALTER TABLE `acct` ADD INDEX ix_bal (bal)"]
    analyze = ["ANALYZE TABLE `acct`"]
    txn: tuple[str, list[str]] = (COMMIT, [])
    assert kinds == [txn, (DDL, add), txn, (DDL, add), (DDL, analyze), (DDL, analyze), txn]
    assert view.ddl.collapsed == 4 * 3
    assert {
        e.body.database
        for t in read_back(files)
        for e in t.events
        if isinstance(e.body, Query) and t.kind == DDL
    } == {"db"}
    assert physical_table(3) == ("db_p00003", "acct_k3Zq_00003")
    # a rerun of the same merge (the CLI's restart) collapses the same way: the same bytes
    again = tmp_path / "again"
    write_binlog(merge_nodes(res.node_files, view=LogicalView(LogicalNames(derive=True)))[0], again)
    assert [f.read_bytes() for f in files] == [
        f.read_bytes() for f in BinlogSeries.open(again / "binlog.index").files
    ]
