"""The merged stream as change-log rows (the schema of ``binlake.spark.changelog``), so the Spark
pipeline applies a sharded database into one set of tables. The order key is the transaction's
virtual TSO (then event and row index): the global commit order, across nodes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from binlake.events.table_map import TableMap
from binlake.globalbinlog.merge import GlobalTxn
from binlake.globalbinlog.sorter import HEARTBEAT
from binlake.schema import SchemaHistory, SchemaTracker
from binlake.spark.changelog import transaction_rows
from binlake.txn import COMMIT, Transaction


def global_changes(
    txns: Iterable[GlobalTxn], source: str = "global", schema: SchemaHistory | None = None
) -> Iterator[dict[str, Any]]:
    """Change-log rows of the merged transactions. ``schema``: the logical tables' DDL, naming the
    columns and primary keys of nodes that write no column metadata (MySQL 5.7 data nodes)."""
    tracker = SchemaTracker(schema, on_mismatch="positional") if schema is not None else None
    for n, g in enumerate(txns, start=1):
        if g.kind == HEARTBEAT:
            continue
        if tracker is not None:
            for e in g.events:
                if isinstance(e.body, TableMap):
                    tracker(e)
        t = Transaction(file_seq=0, source=source, start=n, kind=COMMIT, gtid=g.vtso, events=g.events)
        for i, row in enumerate(transaction_rows(t, source)):
            row.update(
                file="global",
                file_number=0,
                txn_position=n,  # the batch position sinks record: the transaction's rank
                order_key=f"{g.vtso}{i:010d}",
                commit_ts=None,
            )
            yield row
