"""binlake: exact, ordered change data from MySQL-family binary logs."""

from binlake.errors import (
    BadMagicError,
    BinlogError,
    ChecksumMismatchError,
    EncryptedBinlogError,
    IncompleteTailError,
    MalformedEventError,
)
from binlake.reader import BinlogReader, read_events

__all__ = [
    "BadMagicError",
    "BinlogError",
    "BinlogReader",
    "ChecksumMismatchError",
    "EncryptedBinlogError",
    "IncompleteTailError",
    "MalformedEventError",
    "read_events",
]
__version__ = "0.1.0"
