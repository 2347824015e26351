"""The sans-I/O event decoder: the bytes of one event in, typed ``Event`` objects out.

It remembers what a stream establishes (FORMAT_DESCRIPTION, table maps, encryption) and is shared by
the file reader and the replication client. It never reads files or sockets.

When it is built, the compiled envelope (``binlake.events._fastenv``) reads the common events first;
``EventDecoder._decode_one`` is the reference it is tested equal to, and what it hands every other
event (and every damaged one) to.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Callable, Iterator
from types import ModuleType

from binlake import native, sizes
from binlake.errors import BinlogError, ChecksumMismatchError, EncryptedBinlogError, MalformedEventError
from binlake.events import BODY_DECODERS, ENCRYPTION_STARTS
from binlake.events.base import (
    HEADER_V1,
    HEADER_V1_LEN,
    HEADER_V4,
    HEADER_V4_LEN,
    DecodeState,
    Event,
    EventHeader,
    FormatDescription,
    Skipped,
    UnknownEvent,
)
from binlake.events.control import StartV3
from binlake.events.payload import TransactionPayload
from binlake.events.rows import NOT_ASKED, Rows, decode_deferred
from binlake.events.table_map import TableMap
from binlake.events.types import FLAG_BINLOG_IN_USE, V3_POST_HEADER_LEN, EventType, type_name
from binlake.wire import ShortRead, crc32

# What a body decoder may raise on bytes that do not follow the layout.
DECODE_FAILURES = (ShortRead, ValueError, IndexError, KeyError, struct.error, OverflowError, UnicodeError)


def decoded(e: Event) -> Event:
    """``e`` with its rows decoded when they were read undecoded (``decode_rows`` off; else ``e``
    itself); damaged rows raise the error reading them with decoding on raises."""
    b = e.body
    if type(b) is not Rows or b.undecoded_reason != NOT_ASKED:
        return e
    try:
        return dataclasses.replace(e, body=decode_deferred(b))
    except DECODE_FAILURES as err:
        raise MalformedEventError(
            f"malformed {type_name(e.type_code)} event{_inner(e.inner_index)}: {err}",
            event_type=e.type_code,
            source=e.source,
            offset=e.offset,
        ) from None


def _inner(index: int | None) -> str:
    """Where a malformed event sits when it came out of a TRANSACTION_PAYLOAD (its errors say so)."""
    return "" if index is None else f" (inner event {index} of the transaction payload)"


def v3_format(binlog_version: int, server_version: str, created: int) -> FormatDescription:
    """The layout a START_V3 event implies (binlog v1 and v3 files have no FORMAT_DESCRIPTION)."""
    lengths = bytes(V3_POST_HEADER_LEN.get(code, 0) for code in range(1, 20))
    header = HEADER_V1_LEN if binlog_version == 1 else HEADER_V4_LEN
    return FormatDescription(binlog_version, server_version, created, header, lengths, None)


PROVISIONAL_FORMAT = FormatDescription(4, "", 0, HEADER_V4_LEN, b"", None)

# ``_fastenv.decode_event`` while the compiled envelope is chosen (``native.use_compiled``)
_FAST: Callable[[EventDecoder, bytes, int], Event | None] | None = None


def _choose(module: ModuleType | None) -> None:
    global _FAST
    _FAST = None if module is None else module.decode_event


# the envelope in C (optional: without a compiler at install time, this module is the path)
ENVELOPE = native.OptionalModule("binlake.events._fastenv", 10, _choose)


class EventDecoder:
    """Decodes the events of one stream (a file, a series of files, or a replication connection)."""

    def __init__(
        self,
        source: str = "<stream>",
        *,
        verify_checksum: bool = True,
        decode_rows: bool = True,
        max_payload: int | str | None = None,
    ) -> None:
        """``max_payload``: the most bytes one event may make us hold, as read or uncompressed
        (default ``$BINLAKE_MAX_PAYLOAD``, else 1 GiB); beyond it decoding raises ``SizeLimitError``."""
        self.source = source
        self.state = DecodeState(
            verify_checksum=verify_checksum,
            decode_rows=decode_rows,
            max_payload=sizes.max_payload(max_payload),
        )
        self.encrypted_from: int | None = None

    @property
    def fde(self) -> FormatDescription | None:
        return self.state.fde

    @property
    def header_length(self) -> int:
        fde = self.state.fde
        return fde.header_length if fde else HEADER_V4_LEN

    def parse_header(self, raw: bytes, offset: int) -> EventHeader:
        hlen = self.header_length
        if len(raw) < hlen:
            raise MalformedEventError(
                f"event header needs {hlen} bytes, got {len(raw)}", source=self.source, offset=offset
            )
        if hlen == HEADER_V1_LEN:
            ts, code, server_id, size = HEADER_V1.unpack_from(raw)
            return EventHeader(ts, code, server_id, size, offset + size, 0)
        return EventHeader(*HEADER_V4.unpack_from(raw))

    def decode(self, raw: bytes, offset: int, header: EventHeader | None = None) -> Iterator[Event]:
        """The event in ``raw`` (exactly one event's bytes), then any events packed inside it.
        ``header``: its header, when the caller has parsed it already."""
        event = self.decode_event(raw, offset, header)
        yield event
        if isinstance(event.body, TransactionPayload):
            yield from self.inner_events(event)

    def decode_event(self, raw: bytes, offset: int, header: EventHeader | None = None) -> Event:
        """The event in ``raw`` alone, without a generator per event (the file reader's path): the
        events inside a TRANSACTION_PAYLOAD then come from ``inner_events``."""
        if self.encrypted_from is not None:
            raise EncryptedBinlogError(
                f"events from offset {self.encrypted_from} on are encrypted; decryption is out of scope",
                source=self.source,
                offset=offset,
            )
        if header is None:
            fast = _FAST
            if fast is not None:  # the common events in C; None: the reference reads this one
                event = fast(self, raw, offset)
                if event is not None:
                    return event
            header = self.parse_header(raw, offset)
        return self._decode_one(raw, header, offset)

    def skipped(self, head: bytes, offset: int) -> Event:
        """An event known by its header only (its body was not read)."""
        header = self.parse_header(head, offset)
        fde = self.state.fde
        kind = fde.effective_type(header.type_code) if fde else header.type_code
        return Event(header, Skipped(), self.source, offset, None, None, kind)

    def _decode_one(self, raw: bytes, header: EventHeader, offset: int, inner: int | None = None) -> Event:
        fde = self.state.fde
        if fde is None:
            hlen, code = HEADER_V4_LEN, header.type_code
        else:  # the common case read inline (a call per event each is measurable)
            hlen = fde.header_length
            code = (
                header.type_code
                if fde.event_type_permutation is None
                else fde.effective_type(header.type_code)
            )
        # body decoders see the type as we number it; the event keeps the header as written
        seen = header if code == header.type_code else dataclasses.replace(header, type_code=code)
        checksum = None
        try:
            if code == EventType.FORMAT_DESCRIPTION:
                body = BODY_DECODERS[code](raw[hlen:], self.state, seen)
                if body.header_length < HEADER_V4_LEN:
                    raise ValueError(f"header length {body.header_length} is below 19")
                if (
                    body.checksum_alg is not None and inner is None
                ):  # the FDE carries a CRC32 even when checksums are off
                    checksum = self._verify_fde_checksum(raw, header, offset)
                self.state.fde = body
                self.state.table_map_bytes.clear()  # a new layout may read the same bytes otherwise
                return Event(header, body, self.source, offset, checksum, inner, code)
            if inner is not None:
                csize = 0
            elif fde is None:
                csize = _guess_checksum(raw)
            else:
                csize = 4 if fde.checksum_alg == 1 else 0
            if len(raw) < hlen + csize:
                raise ValueError(f"event of {len(raw)} bytes cannot hold a {hlen}-byte header and checksum")
            if csize:
                checksum = int.from_bytes(raw[-4:], "little")
                if self.state.verify_checksum:
                    actual = zlib.crc32(memoryview(raw)[:-4])  # no copy of the event
                    if actual != checksum:
                        raise ChecksumMismatchError(
                            f"CRC32 mismatch in {type_name(code)} event: stored 0x{checksum:08x}, computed 0x{actual:08x}",
                            expected=checksum,
                            actual=actual,
                            source=self.source,
                            offset=offset,
                        )
            body_bytes = raw[hlen : len(raw) - csize]
            decoder = BODY_DECODERS.get(code)
            if code == EventType.TABLE_MAP:
                body = self._table_map(body_bytes, seen)
            else:
                body = UnknownEvent(body_bytes) if decoder is None else decoder(body_bytes, self.state, seen)
        except BinlogError as e:
            raise e.locate(self.source, offset) from None
        except DECODE_FAILURES as e:
            raise MalformedEventError(
                f"malformed {type_name(code)} event{_inner(inner)}: {e}",
                event_type=code,
                source=self.source,
                offset=offset,
            ) from None
        if isinstance(body, StartV3):
            self.state.fde = v3_format(body.binlog_version, body.server_version, body.create_timestamp)
        elif code in ENCRYPTION_STARTS:
            self.encrypted_from = offset + header.event_size
        event = Event(header, body, self.source, offset, checksum, inner, code)
        for observe in self.state.observers_of(code):
            observe(event)
        if code == EventType.TABLE_MAP and isinstance(event.body, TableMap):
            # an observer (the schema tracker) may have put a named view of the map in its place
            self.state.table_maps[event.body.table_id] = event.body
        return event

    def _table_map(self, body_bytes: bytes, header: EventHeader) -> TableMap:
        """The TABLE_MAP body, reused when the table id was last mapped with the very same bytes.
        The map is shared by every event that reuses it: nothing may mutate it (the schema tracker
        names columns in a copy of its own, see ``SchemaTracker``)."""
        table_id = int.from_bytes(body_bytes[:6], "little")  # the id's width does not matter for a key
        cached = self.state.table_map_bytes.get(table_id)
        if cached is not None and cached[0] == body_bytes:
            return cached[1]
        body: TableMap = BODY_DECODERS[EventType.TABLE_MAP](body_bytes, self.state, header)
        self.state.table_map_bytes[table_id] = (body_bytes, body)
        return body

    def _verify_fde_checksum(self, raw: bytes, header: EventHeader, offset: int) -> int:
        stored = int.from_bytes(raw[-4:], "little")
        if not self.state.verify_checksum:
            return stored
        actual = crc32(raw[:-4])
        if actual != stored and header.flags & FLAG_BINLOG_IN_USE:
            # The server checksums the FDE with the in-use flag cleared, then sets the flag in place.
            cleared = bytearray(raw[:-4])
            struct.pack_into("<H", cleared, 17, header.flags & ~FLAG_BINLOG_IN_USE)
            actual = crc32(cleared)
        if actual != stored:
            raise ChecksumMismatchError(
                f"CRC32 mismatch in FORMAT_DESCRIPTION event: stored 0x{stored:08x}, computed 0x{actual:08x}",
                expected=stored,
                actual=actual,
                source=self.source,
                offset=offset,
            )
        return stored

    def inner_events(self, outer: Event) -> Iterator[Event]:
        """The events packed in a TRANSACTION_PAYLOAD event (``outer``), each decoded in turn."""
        payload: TransactionPayload = outer.body
        offset = outer.offset
        try:
            data = memoryview(payload.uncompressed(self.state.max_payload))
        except BinlogError as e:
            raise e.locate(self.source, offset) from None
        except ValueError as e:
            raise MalformedEventError(
                f"cannot uncompress TRANSACTION_PAYLOAD: {e}",
                event_type=outer.type_code,
                source=self.source,
                offset=offset,
            ) from None
        pos, index, hlen = 0, 0, self.header_length
        while pos < len(data):
            if pos + hlen > len(data):
                raise MalformedEventError(
                    f"TRANSACTION_PAYLOAD ends inside the header of inner event {index}",
                    event_type=outer.type_code,
                    source=self.source,
                    offset=offset,
                )
            header = self.parse_header(bytes(data[pos : pos + hlen]), offset)
            if header.event_size < hlen or pos + header.event_size > len(data):
                raise MalformedEventError(
                    f"inner event {index} of TRANSACTION_PAYLOAD has bad size {header.event_size}",
                    event_type=outer.type_code,
                    source=self.source,
                    offset=offset,
                )
            raw = bytes(data[pos : pos + header.event_size])  # one event's copy, not the payload's
            yield self._decode_one(raw, header, offset, inner=index)
            pos += header.event_size
            index += 1
        payload.event_count = index


def _guess_checksum(raw: bytes) -> int:
    """Before any FORMAT_DESCRIPTION (a fake ROTATE of a replication stream, a fragment of a file)
    we cannot know the checksum setting: take 4 bytes as CRC32 only when they match."""
    if len(raw) >= HEADER_V4_LEN + 4 and crc32(raw[:-4]) == int.from_bytes(raw[-4:], "little"):
        return 4
    return 0
