"""Spark filters on the change log pushed into the reader: ``db``, ``table`` and ``op`` equality or
IN, and ranges of ``commit_ts``, become a ``Selection`` applied while transactions are grouped, so
row images of unselected tables are never built.

The pushed selection only ever keeps a superset of what the filters keep; every filter is still
handed back to Spark, which evaluates it exactly. Correctness never depends on the pushdown.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from binlake.events.base import Event
from binlake.filters import OPERATIONS, Selection
from binlake.spark.changelog import SCHEMA_OPS
from binlake.txn import Transaction

ONE_US = dt.timedelta(microseconds=1)


def _literal_glob(value: str) -> str:
    """A glob that matches exactly ``value`` (Selection patterns are fnmatch globs)."""
    return "".join(f"[{c}]" if c in "*?[]" else c for c in value)


def selection_from_filters(filters: Iterable[Any]) -> Selection | None:
    """The Selection implied by the AND of ``filters`` (those it understands), or None."""
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
    )

    allowed: dict[str, set[str]] = {}
    start: dt.datetime | None = None
    stop: dt.datetime | None = None
    for f in filters:
        attribute: tuple[str, ...] = getattr(
            f, "attribute", ()
        )  # Not, IsNull… carry no single attribute+value
        column = attribute[0] if len(attribute) == 1 else None
        if column is None:
            continue
        if column in ("db", "table", "op") and isinstance(f, (EqualTo, In)):
            values = {f.value} if isinstance(f, EqualTo) else set(f.value)
            if not all(isinstance(v, str) for v in values):
                continue
            allowed[column] = allowed[column] & values if column in allowed else values
        elif column == "commit_ts" and isinstance(getattr(f, "value", None), dt.datetime):
            v = f.value
            if isinstance(f, (GreaterThan, GreaterThanOrEqual, EqualTo)):
                start = v if start is None else max(start, v)
            if isinstance(f, (LessThan, LessThanOrEqual, EqualTo)):
                end = v if isinstance(f, LessThan) else v + ONE_US
                stop = end if stop is None else min(stop, end)
    if "table" in allowed and any("." in t for t in allowed["table"]):
        del allowed["table"]  # a dot would read as db.table in a Selection pattern
    ops = allowed.get("op")
    if ops is not None:  # rename, drop and add-column rows come from DDL statements
        ops = {"ddl" if o in SCHEMA_OPS else o for o in ops}
    if ops is not None and not ops <= set(OPERATIONS):
        ops = {o for o in ops if o in OPERATIONS} or {"<none>"}
    if not allowed and start is None and stop is None:
        return None
    nothing = ["[]"]  # an empty IN (or contradictory equalities) selects nothing: a glob matching nothing
    return Selection(
        start_time=start,
        stop_time=stop,
        databases=[_literal_glob(v) for v in sorted(allowed["db"])] or nothing if "db" in allowed else [],
        tables=[_literal_glob(v) for v in sorted(allowed["table"])] or nothing if "table" in allowed else [],
        operations=sorted(ops) if ops is not None else [],
    )


class AllOf:
    """Several selections at once (the data-source options and the pushed filters)."""

    def __init__(self, *parts: Selection) -> None:
        self.parts = parts

    def keeps_transaction(self, t: Transaction) -> bool:
        return all(p.keeps_transaction(t) for p in self.parts)

    def keeps_event(self, t: Transaction, ev: Event) -> bool:
        return all(p.keeps_event(t, ev) for p in self.parts)

    def keeps_table(self, database: str, table: str) -> bool:
        return all(p.keeps_table(database, table) for p in self.parts)
