"""binlake: exact, ordered change data from MySQL-family binary logs.

The public Python API (see README, "Python API"): events of a file (``read_events``,
``BinlogReader``), series of files (``BinlogSeries``), transactions (``transactions``), position
search (``find_position``), GTID sets, and the error types. ``import binlake`` imports neither
Spark nor sockets: the replica client (``ReplicaClient`` and its ``ServerAddress``, ``FilePosition``,
``GtidStart``) is imported the first time one of them is used.
"""

from __future__ import annotations

__version__ = "0.1.0"  # first: modules binlake imports may read it

import importlib
from typing import TYPE_CHECKING

from binlake.api import Source, find_position, open_series, transactions
from binlake.errors import (
    BadMagicError,
    BinlogError,
    ChecksumMismatchError,
    ConnectionLostError,
    EncryptedBinlogError,
    IncompleteTailError,
    MalformedEventError,
    NoFormatDescriptionError,
    NotAnEventStartError,
    ReplicationError,
    SizeLimitError,
)
from binlake.events.base import Event
from binlake.gtid import AnyGtidSet, GtidSet, GtidSetError, MariaGtidPos
from binlake.position import Found
from binlake.reader import BinlogReader, read_events
from binlake.series import BinlogSeries, Position, SeriesError
from binlake.txn import Transaction

if TYPE_CHECKING:
    from binlake.changes import Op, OrderKey, RowChange, row_changes
    from binlake.replication.client import FilePosition, GtidStart, ReplicaClient, ServerAddress


# Public names whose module needs sockets (and TLS), or the DDL parser (the change model reads
# renames from DDL): imported on first use, not with binlake.
_LAZY = {
    "row_changes": "binlake.changes",
    "RowChange": "binlake.changes",
    "OrderKey": "binlake.changes",
    "Op": "binlake.changes",
    "ReplicaClient": "binlake.replication.client",
    "ServerAddress": "binlake.replication.client",
    "FilePosition": "binlake.replication.client",
    "GtidStart": "binlake.replication.client",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'binlake' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AnyGtidSet",
    "BadMagicError",
    "BinlogError",
    "BinlogReader",
    "BinlogSeries",
    "ChecksumMismatchError",
    "ConnectionLostError",
    "EncryptedBinlogError",
    "Event",
    "FilePosition",
    "Found",
    "GtidSet",
    "GtidSetError",
    "GtidStart",
    "IncompleteTailError",
    "MalformedEventError",
    "MariaGtidPos",
    "Op",
    "OrderKey",
    "RowChange",
    "NoFormatDescriptionError",
    "NotAnEventStartError",
    "Position",
    "ReplicaClient",
    "ReplicationError",
    "SeriesError",
    "ServerAddress",
    "SizeLimitError",
    "Source",
    "Transaction",
    "find_position",
    "open_series",
    "read_events",
    "row_changes",
    "transactions",
]
