"""The merged stream as row changes (``binlake.changes``), so the Spark pipeline applies a sharded
database into one set of tables. The order key is the transaction's virtual TSO (then event and row
index): the global commit order, across nodes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from binlake.changes import OrderKey, Origin, RowChange, event_changes
from binlake.globalbinlog import vtso
from binlake.globalbinlog.merge import GlobalTxn
from binlake.globalbinlog.sorter import DDL_KIND, HEARTBEAT
from binlake.schema import SchemaHistory, SchemaTracker

GLOBAL_FILE = "global"


def global_row_changes(
    txns: Iterable[GlobalTxn],
    source: str = "global",
    schema: SchemaHistory | None = None,
    *,
    ddl: bool = True,
) -> Iterator[RowChange]:
    """Row changes of the merged transactions. ``schema``: the logical tables' DDL, naming the
    columns and primary keys of nodes that write no column metadata (MySQL 5.7 data nodes). A
    transaction's ``txn_position`` is its rank in the merged stream (the batch position sinks
    record), its ``gtid`` the vtso. ``ddl``: a DDL's renames, drops and added columns are name
    changes and the schema history replays it, as for a single server — right where the merge
    collapsed each shard's copy into one logical DDL (logical names); without that, every node's
    copy would apply again (False: DDL is passed over, the schema stays as given)."""
    tracker = SchemaTracker(schema, on_mismatch="positional") if schema is not None else None
    for n, g in enumerate(txns, start=1):
        if g.kind == HEARTBEAT:
            continue
        events = g.events
        is_ddl = g.kind == DDL_KIND
        if is_ddl and not ddl:
            continue
        if tracker is not None:
            tracker.name_events(events)
        origin = Origin(source, 0, n, g.vtso, None, None, None)
        base = OrderKey.of_vtso(*vtso.parse(g.vtso))
        yield from event_changes(events, origin, base, ddl=is_ddl, file=GLOBAL_FILE)
