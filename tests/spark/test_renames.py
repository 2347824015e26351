"""Rename plans (pure Python): rows mapped to their names at the end of a batch, and the steps that
rename targets, checked against a model that follows tables and columns by identity."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.changes import OrderKey
from binlake.schema.renames import ColumnRename, TableRename
from binlake.spark.renames import RenamePlan, plan_renames, renamed_columns

DB = "d"


def _key(key: str | bytes) -> bytes:
    """An order key: bytes as the change log has them (``OrderKey.encode()``); test names as bytes."""
    return key.encode() if isinstance(key, str) else key


def rename_table(key: str | bytes, old: str, new: str) -> dict[str, Any]:
    after = {"db": DB, "table": new}
    before = {"db": DB, "table": old}
    return {
        "order_key": _key(key),
        "db": DB,
        "table": old,
        "op": "rename_table",
        "before": before,
        "after": after,
    }


def rename_column(key: str, table: str, old: str, new: str) -> dict[str, Any]:
    return {
        "order_key": _key(key),
        "db": DB,
        "table": table,
        "op": "rename_column",
        "before": {"column": old},
        "after": {"column": new},
    }


def final_of(plan: RenamePlan, table: str, key: str | bytes) -> tuple[str, dict[str, str]]:
    """Where a row of ``table`` at ``key`` goes (as ``follow_renames`` maps it in Spark)."""
    key = _key(key)
    for s in plan.segments:
        if s.table == (DB, table) and s.lo <= key < s.hi:
            return s.final[1], json.loads(s.columns) if s.columns else {}
    return table, {}


def run_steps(targets: dict[str, list[str]], steps: list[Any]) -> dict[str, list[str]]:
    """Steps applied to a model of the targets (table -> columns), as the sinks apply them."""
    out = {k: list(v) for k, v in targets.items()}
    for s in steps:
        if isinstance(s, TableRename) and s.old[1] in out:
            assert s.new[1] not in out, "a move into a taken name"
            out[s.new[1]] = out.pop(s.old[1])
        elif isinstance(s, ColumnRename) and s.table[1] in out:
            cols = out[s.table[1]]
            if s.old in cols:
                assert s.new not in cols
                cols[cols.index(s.old)] = s.new
    return out


def test_a_swap_through_a_temporary_name() -> None:
    plan = plan_renames(
        [rename_table("k1", "a", "t"), rename_table("k2", "b", "a"), rename_table("k3", "t", "b")]
    )
    assert final_of(plan, "a", "k0") == ("b", {})
    assert final_of(plan, "b", "k0") == ("a", {})
    assert final_of(plan, "a", "k4") == ("a", {})  # after the swap `a` is the old `b`, final name a
    assert run_steps({"a": ["x"], "b": ["y"]}, plan.steps()) == {"b": ["x"], "a": ["y"]}
    assert plan.steps(b"k3") == []  # the targets follow already


def test_renamed_back_is_nothing_and_columns_follow_the_table() -> None:
    plan = plan_renames(
        [rename_table("k1", "o", "o2"), rename_column("k2", "o2", "x", "x_r"), rename_table("k3", "o2", "o")]
    )
    assert final_of(plan, "o", "k0") == ("o", {"x": "x_r"})
    assert final_of(plan, "o2", "k2a") == ("o", {})
    assert run_steps({"o": ["id", "x"]}, plan.steps()) == {"o": ["id", "x_r"]}
    assert renamed_columns([{"name": "X"}, {"name": "id"}], json.dumps({"x": "x_r"})) == [
        {"name": "x_r", "from": "X"},
        {"name": "id"},
    ]


def test_a_new_table_of_an_old_name_is_another_table() -> None:
    plan = plan_renames([rename_table("k1", "t", "t2"), rename_table("k3", "t", "t3")])
    assert final_of(plan, "t", "k0") == ("t2", {})
    assert final_of(plan, "t", "k2") == ("t3", {})  # created after the first rename
    assert run_steps({"t": ["a"]}, plan.steps()) == {"t2": ["a"]}
    assert run_steps({"t2": ["a"], "t": ["b"]}, plan.steps(b"k1")) == {"t2": ["a"], "t3": ["b"]}


Snapshot = dict[int, tuple[str, dict[str, int]]]  # table id -> (name, column name -> column id)


def drop_table(key: str | bytes, table: str) -> dict[str, Any]:
    before = {"db": DB, "table": table}
    return {
        "order_key": _key(key),
        "db": DB,
        "table": table,
        "op": "drop_table",
        "before": before,
        "after": None,
    }


def test_a_dropped_table_is_kept_aside_and_its_name_starts_empty() -> None:
    """DROP TABLE a; RENAME TABLE a_new TO a (a manual swap): the old rows go aside, a is a_new."""
    key = OrderKey(3, 1234).encode()
    plan = plan_renames([drop_table(key, "a"), rename_table(OrderKey(3, 1234, row=1).encode(), "a_new", "a")])
    aside = "_binlake_dropped_3_1234_a"
    assert final_of(plan, "a", b"") == (aside, {})  # rows of the old a written before the drop
    assert final_of(plan, "a_new", b"") == ("a", {})
    assert run_steps({"a": ["old"], "a_new": ["new"]}, plan.steps()) == {aside: ["old"], "a": ["new"]}
    # a drop alone (or TRUNCATE): the target keeps the rows aside; a new table of the name starts empty
    plan = plan_renames([drop_table(key, "t")])
    assert final_of(plan, "t", OrderKey(3, 1235).encode()) == ("t", {})
    assert run_steps({"t": ["x"]}, plan.steps()) == {"_binlake_dropped_3_1234_t": ["x"]}


@st.composite
def histories(draw: Any) -> tuple[list[dict[str, Any]], list[tuple[str, str, str, int, int]], list[Snapshot]]:
    """Random renames of tables and columns, tables created in freed names, and row changes; the
    model follows identities: each row change's table and column ids, and the tables as they were
    before each rename (and at the end)."""
    names, cols = ["a", "b", "c", "t"], ["x", "y", "z"]
    tables: dict[str, int] = {"a": 0, "b": 1}  # name -> table id
    columns: dict[int, dict[str, int]] = {0: {"x": 0, "y": 1}, 1: {"x": 2, "y": 3}}
    renames: list[dict[str, Any]] = []
    rows: list[tuple[str, str, str, int, int]] = []  # (key, table, column, table id, column id)
    snapshots: list[Snapshot] = []

    def snapshot() -> Snapshot:
        return {tid: (name, dict(columns[tid])) for name, tid in tables.items()}

    next_id = 10
    for i in range(draw(st.integers(1, 16))):
        key = f"k{i:03d}"
        kind = draw(st.sampled_from(["table", "column", "create", "row", "row"]))
        if kind == "table":
            old = draw(st.sampled_from(sorted(tables)))
            free = [n for n in names if n not in tables]
            if not free:
                continue
            snapshots.append(snapshot())
            new = draw(st.sampled_from(free))
            tables[new] = tables.pop(old)
            renames.append(rename_table(key, old, new))
        elif kind == "column":
            t = draw(st.sampled_from(sorted(tables)))
            tc = columns[tables[t]]
            free = [c for c in cols if c not in tc]
            if not free:
                continue
            snapshots.append(snapshot())
            old, new = draw(st.sampled_from(sorted(tc))), draw(st.sampled_from(free))
            tc[new] = tc.pop(old)
            renames.append(rename_column(key, t, old, new))
        elif kind == "create":
            free = [n for n in names if n not in tables]
            if free:
                tables[draw(st.sampled_from(free))] = next_id
                columns[next_id] = {"x": next_id + 1}
                next_id += 2
        else:
            t = draw(st.sampled_from(sorted(tables)))
            c = draw(st.sampled_from(sorted(columns[tables[t]])))
            rows.append((key, t, c, tables[t], columns[tables[t]][c]))
    snapshots.append(snapshot())
    return renames, rows, snapshots


@settings(max_examples=400, deadline=None)
@given(histories(), st.integers(0, 20))
def test_rows_and_targets_follow_identity(history: Any, cut: int) -> None:
    renames, rows, snapshots = history
    plan = plan_renames(renames)
    final = snapshots[-1]
    for key, table, column, tid, cid in rows:  # every row change goes to its table's final name
        name, columns = final_of(plan, table, key)
        assert name == final[tid][0]
        final_column = next(n for n, c in final[tid][1].items() if c == cid)
        assert columns.get(column.lower(), column) == final_column
    # targets that followed the first `cut` renames: the steps bring them to the final names
    cut = min(cut, len(renames))
    base = renames[cut - 1]["order_key"] if cut else b""
    targets = {name: sorted(cols) for name, cols in snapshots[cut].values()}
    want = {final[tid][0]: sorted(final[tid][1]) for tid in snapshots[cut]}
    assert {k: sorted(v) for k, v in run_steps(targets, plan.steps(base)).items()} == want


@settings(max_examples=400, deadline=None)
@given(histories(), st.integers(0, 20), st.integers(0, 20), st.integers(0, 20))
def test_the_steps_do_not_depend_on_where_the_batch_began(history: Any, cut: int, start: int, end: int) -> None:
    """A batch killed while renaming its targets may be read again from elsewhere (the whole series,
    or where the last sync ended: ``binlake.spark.resume``), ending at the same transaction: the
    journal's count of steps done must mean the same steps. Targets that followed the first ``cut``
    renames get the same steps, in the same order, from every batch that begins at or before them."""
    renames = history[0]
    cut = min(cut, len(renames))
    start = min(start, cut)
    base = renames[cut - 1]["order_key"] if cut else b""
    assert plan_renames(renames[start:]).steps(base) == plan_renames(renames).steps(base)
    # nor on where it ends: a batch that goes further finds a killed batch's steps (to its end)
    end = max(cut, min(end, len(renames)))
    upto = renames[end - 1]["order_key"] if end else b""
    assert plan_renames(renames[start:]).steps(base, upto) == plan_renames(renames[:end]).steps(base)
