"""Typed errors for bad input. Every error names the file and byte offset it concerns.

The CLI prints ``str(error)`` as one line; callers that want details read the attributes.
"""

from __future__ import annotations


class BinlogError(Exception):
    """Base of every error caused by the binlog bytes (never by a bug of ours)."""

    def __init__(self, message: str, *, source: str | None = None, offset: int | None = None) -> None:
        self.message = message
        self.source = source
        self.offset = offset
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.source is not None:
            where.append(str(self.source))
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{': '.join([', '.join(where), self.message]) if where else self.message}"

    def locate(self, source: str | None, offset: int | None) -> BinlogError:
        """Fill in where the error happened when the raiser did not know."""
        if self.source is None:
            self.source = source
        if self.offset is None:
            self.offset = offset
        self.args = (self._render(),)
        return self


class NotAnEventStartError(BinlogError):
    """A start position that is not where an event starts (reading there would decode garbage)."""


class BadMagicError(BinlogError):
    """The file does not start with the binlog magic ``\\xfebin``."""


class EncryptedBinlogError(BinlogError):
    """The file (or the rest of it) is encrypted; decryption is out of scope."""


class ChecksumMismatchError(BinlogError):
    """An event's CRC32 does not match its bytes."""

    def __init__(self, message: str, *, expected: int, actual: int, **kw: object) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(message, **kw)  # type: ignore[arg-type]


class MalformedEventError(BinlogError):
    """An event's bytes do not follow its layout (too short, bad length, impossible value)."""

    def __init__(self, message: str, *, event_type: int | None = None, **kw: object) -> None:
        self.event_type = event_type
        super().__init__(message, **kw)  # type: ignore[arg-type]


class SizeLimitError(BinlogError):
    """A length in the input (an event's size, what a compressed payload inflates to) passes the
    configured ceiling: refused before the memory is allocated. A decompression bomb or a forged length,
    or a real event bigger than the ceiling (raise it with ``BINLAKE_MAX_PAYLOAD`` / ``max_payload``)."""

    def __init__(self, message: str, *, size: int, limit: int, **kw: object) -> None:
        self.size = size
        self.limit = limit
        super().__init__(message, **kw)  # type: ignore[arg-type]


class IncompleteTailError(BinlogError):
    """The file ends inside an event: the server may still be writing it (or the file was cut)."""


class SeriesError(BinlogError):
    """The files of a series are missing, out of order, or do not link (or a file given is not one)."""


class NoFormatDescriptionError(BinlogError):
    """Events follow the magic without a FORMAT_DESCRIPTION event to say how to read them."""


class ReplicationError(BinlogError):
    """The server refused or ended a replication stream (purged binlog, bad position, privileges), or
    sent bytes that are not a replication stream. ``code`` is the server's error number when it gave one;
    ``source`` names the server and ``offset`` the binlog position asked for or reached."""

    def __init__(self, message: str, *, code: int | None = None, **kw: object) -> None:
        self.code = code
        super().__init__(message, **kw)  # type: ignore[arg-type]


class ConnectionLostError(ReplicationError):
    """The connection to the server dropped or went silent; reconnecting can continue the stream."""


class UnappliableChangeError(BinlogError):
    """A change the binlog carries too little of for a sink to apply: a partial JSON update
    (``binlog_row_value_options=PARTIAL_JSON``) holds only edits of the old document, and the sink
    refuses it before it writes anything rather than store a wrong value. ``table`` is ``db.table``;
    ``column`` the column concerned."""

    def __init__(self, message: str, *, table: str, column: str, **kw: object) -> None:
        self.table = table
        self.column = column
        super().__init__(message, **kw)  # type: ignore[arg-type]
