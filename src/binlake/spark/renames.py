"""Following renames: a table or column renamed upstream keeps its rows in the target.

A batch's ``rename_table`` / ``rename_column`` change-log rows (few) are planned on the driver:

* every row change is mapped to its table's and columns' names at the END of the batch (a row written
  to ``orders`` before ``RENAME TABLE orders TO orders_v2`` belongs to ``orders_v2``), so the last
  change per key is found across the rename;
* the targets as they were before the batch are renamed the same way, net (``a -> b -> a`` is
  nothing; a swap goes through temporary names), before the batch's rows are applied.

Names are followed by identity: after ``a`` is renamed away or dropped, a later ``a`` is a new table
(or column). A dropped (or truncated) table is kept in the target aside, ``_binlake_dropped_<file>_<pos>_<name>``.

Everything here works on names in sink space (``binlake.targetnames``): a source name with binlake's
prefix has it twice, so the names binlake makes up (temporary, dropped, replaced) never meet one.
Limitation (documented): a column dropped and replaced by a rename within one batch is not told apart
from the one renamed away.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from binlake.changes import OrderKey
from binlake.schema.renames import ColumnRename, TableName, TableRename
from binlake.spark.changelog import ADD_COLUMN, DROP_TABLE, NAME_OPS, RENAME_COLUMN, RENAME_TABLE, ROW_OPS
from binlake.targetnames import (
    SYSTEM_PREFIX,
    NameCollisionError,
    dropped_name,
    escape_reserved,
    renaming_name,
)

FAR = b"\xff" * 36  # an order key above every real one (OrderKey.encode(): 35 bytes)


@dataclass
class _Named:
    """A table or a column followed through renames: its name from each interval on."""

    names: list[tuple[int, str | TableName]]

    def name_at(self, interval: int) -> Any:
        out = None
        for since, name in self.names:
            if since > interval:
                break
            out = name
        return out

    @property
    def final(self) -> Any:
        return self.names[-1][1]

    def born(self) -> int:
        return self.names[0][0]


@dataclass
class _Table(_Named):
    columns: dict[str, _Named] = field(default_factory=dict)  # lower-case current name -> column
    all_columns: list[_Named] = field(default_factory=list)


@dataclass(frozen=True)
class Segment:
    """Rows of ``table`` with ``lo <= order_key < hi`` belong to ``final``; their columns are renamed
    by ``columns`` (lower-case name then -> name at the end; JSON, None when none)."""

    table: TableName
    lo: bytes
    hi: bytes
    final: TableName
    columns: str | None


Step = TableRename | ColumnRename  # a target step: a rename, of a table or of a column in it


@dataclass
class RenamePlan:
    segments: list[Segment]
    tables: list[_Table]  # every table the renames touched
    keys: list[bytes]  # the renames' order keys, in order
    aside: set[TableName] = field(default_factory=set)  # where dropped tables are kept

    def net(self, after: bytes = b"", upto: bytes | None = None) -> list[Step]:
        """The net renames from the targets as they were after the renames up to order key
        ``after`` (the sink's last batch) to the end of this batch (or to order key ``upto``):
        tables (old -> new name), then columns (in the table's new name)."""
        m = sum(1 for k in self.keys if k <= after)  # the interval the targets are in
        n = len(self.keys) if upto is None else sum(1 for k in self.keys if k <= upto)  # and go to
        # by their names then: the same steps in the same order however far back the batch began
        # (a batch replayed after a kill may be read from elsewhere: ``binlake.spark.resume``), so a
        # journal's count of steps done means the same steps
        there = sorted((t for t in self.tables if t.born() <= m), key=lambda t: t.name_at(m))
        out: list[Step] = [
            TableRename(t.name_at(m), t.name_at(n)) for t in there if t.name_at(m) != t.name_at(n)
        ]
        for t in there:
            columns = [c for c in t.all_columns if c.born() <= m and c.name_at(m) != c.name_at(n)]
            out += [
                ColumnRename(t.name_at(n), c.name_at(m), c.name_at(n))
                for c in sorted(columns, key=lambda c: c.name_at(m))
            ]
        return out

    def steps(self, after: bytes = b"", upto: bytes | None = None) -> list[Step]:
        """``net`` as steps a sink can run one by one: through temporary names, so swaps and cycles
        work and each step is a plain move into a free name."""
        net = self.net(after, upto)
        tables = [s for s in net if isinstance(s, TableRename)]
        steps: list[Step] = [TableRename(s.old, (s.old[0], renaming_name(i))) for i, s in enumerate(tables)]
        steps += [TableRename((s.old[0], renaming_name(i)), s.new) for i, s in enumerate(tables)]
        columns: dict[TableName, list[ColumnRename]] = {}
        for s in net:
            if isinstance(s, ColumnRename):
                columns.setdefault(s.table, []).append(s)
        for table, moves in columns.items():
            steps += [ColumnRename(table, c.old, renaming_name(i)) for i, c in enumerate(moves)]
            steps += [ColumnRename(table, renaming_name(i), c.new) for i, c in enumerate(moves)]
        return steps


def plan_renames(rows: list[dict[str, Any]]) -> RenamePlan:
    """The plan for a batch's rename rows (dicts with order_key (bytes), db, table, op, before and
    after (dicts: db and table, or column; after None for a drop); names in sink space, see
    ``sink_name_rows``)."""
    rows = sorted(rows, key=lambda r: r["order_key"])
    tables: dict[TableName, _Table] = {}  # name now -> table
    every: list[_Table] = []
    dropped: dict[int, _Table] = {}  # index of a DROP TABLE row -> the table it dropped
    aside: set[TableName] = set()

    def table(name: TableName) -> _Table:
        t = tables.get(name)
        if t is None:  # first mention: the table of that name before the batch
            t = tables[name] = _Table([(0, name)])
            every.append(t)
        return t

    for i, r in enumerate(rows):
        after = r["after"]
        name = (r["db"], r["table"])
        t = table(name)
        if r["op"] == DROP_TABLE:
            dropped[i] = t
            fresh = tables[name] = _Table([(i + 1, name)])  # a later table of that name is another
            every.append(fresh)
        elif r["op"] == RENAME_TABLE:
            new = (after["db"], after["table"])
            t.names.append((i + 1, new))
            fresh = tables[name] = _Table([(i + 1, name)])  # a later table of the old name
            every.append(fresh)
            tables[new] = t
        elif r["op"] == RENAME_COLUMN:
            old = r["before"]["column"]
            c = t.columns.get(old.lower())
            if c is None:
                c = t.columns[old.lower()] = _Named([(t.born(), old)])
                t.all_columns.append(c)
            c.names.append((i + 1, after["column"]))
            fresh_column = t.columns[old.lower()] = _Named([(i + 1, old)])
            t.all_columns.append(fresh_column)
            t.columns[after["column"].lower()] = c
    # a dropped (or truncated) table is kept in the target, aside, under
    # `_binlake_dropped_<file>_<pos>_<name>` with its rows of the batch; a later table of its name starts empty
    for i, r in enumerate(rows):
        if r["op"] == DROP_TABLE:
            t = dropped[i]
            db, name = t.name_at(i)
            k = OrderKey.decode(r["order_key"])
            t.names.append((i + 1, (db, dropped_name(name, k.major, k.minor))))
            aside.add(t.final)
    keys = [b""] + [r["order_key"] for r in rows] + [FAR]
    return RenamePlan(_segments(every, keys), every, keys[1:-1], aside)


def _segments(every: list[_Table], keys: list[bytes]) -> list[Segment]:
    out = []
    for t in every:
        changes = sorted({since for since, _ in t.names} | {s for c in t.all_columns for s, _ in c.names})
        changes = [s for s in changes if s >= t.born()]
        for a, b in zip(changes, [*changes[1:], len(keys) - 1], strict=True):
            name = t.name_at(a)
            columns = {
                c.name_at(a).lower(): c.final
                for c in t.all_columns
                if c.born() <= a and c.name_at(a) != c.final
            }
            if name != t.final or columns:
                out.append(Segment(name, keys[a], keys[b], t.final, json.dumps(columns) if columns else None))
    return out


def renamed_columns(columns: list[dict[str, Any]], mapping: str | None) -> list[dict[str, Any]]:
    """A layout's columns under their names at the end of the batch; ``from`` keeps the name the
    row images use."""
    if not mapping:
        return columns
    names = json.loads(mapping)
    return [
        {**c, "name": names[c["name"].lower()], "from": c.get("from", c["name"])}
        if c["name"].lower() in names
        else c
        for c in columns
    ]


def layout_columns(
    layout: list[dict[str, Any]], renamed: str | None, name: Callable[[str], str] = str
) -> list[dict[str, Any]]:
    """A change-log layout (``columns``, as dicts) as a sink writes it: columns in sink space (binlake's
    prefix reserved), under their names at the end of the batch, then ``name`` (a dialect's length
    limit); ``from`` is the name the row images use. Two columns on one name are refused."""
    sink = [{**c, "name": escape_reserved(c["name"]), "from": c["name"]} for c in layout]
    out = [{**c, "name": name(c["name"])} for c in renamed_columns(sink, renamed)]
    seen = [c["name"].lower() for c in out]
    if len(set(seen)) != len(seen):
        raise NameCollisionError(f"two columns of one table map to one target column: {sorted(seen)}")
    return out


def sink_name_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rename rows with every table and column name in sink space (binlake's prefix reserved)."""
    out = []
    for r in rows:
        before, after = (dict(r[k]) if r[k] is not None else None for k in ("before", "after"))
        for image in (before, after):
            for k in ("table", "column"):
                if image and k in image:
                    image[k] = escape_reserved(image[k])
        out.append({**r, "table": escape_reserved(r["table"]), "before": before, "after": after})
    return out


def sink_names(df: Any) -> Any:
    """The change log with its table names in sink space (``escape_reserved`` in Spark)."""
    from pyspark.sql import functions as F

    table = F.col("table")
    escaped = F.when(table.startswith(SYSTEM_PREFIX), F.concat(F.lit(SYSTEM_PREFIX), table)).otherwise(table)
    return df.withColumn("table", escaped)


# the segments ``follow_renames`` joins a batch's rows with: a table's name over an order-key range,
# its name at the end of the batch, and its column renames there
SEGMENTS = pa.schema(
    [("s_db", pa.string()), ("s_table", pa.string()), ("s_lo", pa.binary()), ("s_hi", pa.binary()),
     ("f_db", pa.string()), ("f_table", pa.string()), ("renamed", pa.string())]
)  # fmt: skip


def follow_renames(df: Any, plan: RenamePlan) -> Any:
    """The change log's row changes under their tables' names at the end of the batch, with a
    ``renamed`` column (a layout's column renames, JSON, or NULL)."""
    from pyspark.sql import functions as F

    if not plan.segments:
        return df.withColumn("renamed", F.lit(None).cast("string"))
    # from Arrow: a relation the driver holds (from Python rows it was a job of Python workers,
    # started for a few rows: seconds on a small machine)
    rows = [(s.table[0], s.table[1], s.lo, s.hi, s.final[0], s.final[1], s.columns) for s in plan.segments]
    segments = pa.table([list(c) for c in zip(*rows, strict=True)], schema=SEGMENTS)
    seg = df.sparkSession.createDataFrame(segments)
    on = (
        (F.col("db") == F.col("s_db"))
        & (F.col("table") == F.col("s_table"))
        & (F.col("order_key") >= F.col("s_lo"))
        & (F.col("order_key") < F.col("s_hi"))
    )
    joined = df.join(F.broadcast(seg), on, "left")
    named = {
        "db": F.coalesce(F.col("f_db"), F.col("db")).alias("db"),
        "table": F.coalesce(F.col("f_table"), F.col("table")).alias("table"),
    }
    return joined.select(*[named.get(c, F.col(c)) for c in df.columns], "renamed")


def renamed_changes(df: Any, names: bool = True, ops: Any = None) -> tuple[Any, RenamePlan]:
    """A batch's row changes and added columns under their names at the end of the batch (see
    ``follow_renames``), and the plan of its renames; names in sink space. ``names=False``: the
    caller knows the batch renames and drops nothing (no Spark job looks). ``ops``: a frame that
    holds the batch's renames and drops (its DDL changes, kept apart), read instead of ``df``."""
    from pyspark.sql import functions as F

    df = sink_names(df)
    found = (
        (df if ops is None else sink_names(ops))
        .where(F.col("op").isin(*NAME_OPS))
        .select("order_key", "db", "table", "op", "before", "after")
        .collect()
        if names
        else []
    )
    rows = [
        {
            **r.asDict(),
            "order_key": bytes(r["order_key"]),
            "before": r["before"].toPython() if r["before"] is not None else None,
            "after": r["after"].toPython() if r["after"] is not None else None,
        }
        for r in found
    ]
    plan = plan_renames(sink_name_rows(rows))
    return follow_renames(df.where(F.col("op").isin(*ROW_OPS, ADD_COLUMN)), plan), plan


@dataclass
class Journal:
    """How far a sink got renaming its targets: the batch ``version`` (whose changes end at order
    key ``upto``) renamed from the state after order key ``base``; ``done`` steps are behind."""

    version: int
    base: bytes
    upto: bytes
    done: int


def rename_work(
    journal: Journal | None, plan: RenamePlan, version: int, upto: bytes
) -> tuple[list[tuple[Journal, list[Step]]], list[str]]:
    """What a sink runs for batch ``version`` (ending at ``upto``): journals and their steps, in
    order (each journal's first ``done`` steps are behind), and the net renames as text for reports.
    A batch re-reading renames the targets already follow (a rerun over the same files, a replayed
    batch) has nothing to do. A journal a killed run left unfinished is finished first, its steps
    found again in this batch (which reads from no later than where that one did): a batch that
    goes further (files arrived since the kill) starts its own journal only from where that one
    ends, with the targets there."""
    if journal is not None and journal.version > version:
        return [], []  # an older batch replayed: its renames are behind us
    phases: list[tuple[Journal, list[Step]]] = []
    if journal is not None and journal.version != version:
        left = plan.steps(journal.base, journal.upto)
        if journal.done < len(left):
            phases.append((journal, left))
        journal = Journal(version, journal.upto, upto, 0)
    elif journal is None:
        journal = Journal(version, b"", upto, 0)
    phases.append((journal, plan.steps(journal.base)))
    first = phases[0][0].base
    return phases, [describe(s, plan.aside) for s in plan.net(first)]


def describe(step: Step, aside: set[TableName]) -> str:
    """A rename as a report line."""
    if isinstance(step, TableRename):
        why = " (dropped upstream, kept aside)" if step.new in aside else ""
        return f"{'.'.join(step.old)} -> {'.'.join(step.new)}{why}"
    return f"{'.'.join(step.table)}: column {step.old} -> {step.new}"
