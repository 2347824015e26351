"""Reading binlog files from disk: magic, the format event, then one event at a time.

Memory stays bounded by the largest single event: the file is never read whole. A file that ends
inside an event raises ``IncompleteTailError`` (the server may still be writing it) after every
complete event before it has been yielded.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, BinaryIO, NoReturn

from binlake import decoder as decoder_module
from binlake.decoder import EventDecoder
from binlake.errors import (
    BadMagicError,
    EncryptedBinlogError,
    IncompleteTailError,
    MalformedEventError,
    NoFormatDescriptionError,
    NotAnEventStartError,
    SeriesError,
    SizeLimitError,
)
from binlake.events.base import Event
from binlake.events.payload import TransactionPayload
from binlake.events.types import EventType
from binlake.sizes import MAX_PAYLOAD_ENV
from binlake.wire import crc32

BINLOG_MAGIC = b"\xfebin"
ENCRYPTED_MAGIC = b"\xfdbin"
FIRST_EVENT = 4
READ_BUFFER = 1 << 20
FAST_CHUNK = 1 << 18  # the compiled path's buffer of the file (a larger event goes the reader's way)
RUN_BYTES = 1 << 12  # a run of events decoded in one call holds at most this many bytes (or one event)
FORMAT_EVENTS = (EventType.FORMAT_DESCRIPTION, EventType.START_V3)


def check_magic(head: bytes, source: str) -> None:
    if head == BINLOG_MAGIC:
        return
    if head == ENCRYPTED_MAGIC:
        raise EncryptedBinlogError(
            "encrypted binlog file (magic 0xfd 'bin'); decryption needs the server keyring and is out of scope",
            source=source,
            offset=0,
        )
    raise BadMagicError(
        f"not a binlog file: starts with {head!r}, expected {BINLOG_MAGIC!r}", source=source, offset=0
    )


class BinlogReader:
    """Iterate the events of one binlog (or relay log) file.

    ``start_position`` seeks to an event boundary after the format event has been read (the format
    event itself is always yielded first, so consumers know the layout). ``stop_position``: no event
    starting at or after it is yielded. ``require_fde=False`` reads a fragment without a format event
    under the provisional v4 layout instead of raising ``NoFormatDescriptionError``. Event types in
    ``skip`` are not read at all (their bodies are seeked over and come out as ``Skipped``): the
    header-only scan of position search and statistics uses it; with ``omit_skipped`` they do not
    come out at all (a pass that needs none of them: the DDL pass), nor, with ``known``, the events
    it drops from their bytes (``KnownEvents``: each ``BEGIN``, a TABLE_MAP met before).
    ``max_payload``: the largest event (as read or uncompressed) to hold in memory, see
    ``EventDecoder``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        verify_checksum: bool = True,
        decode_rows: bool = True,
        start_position: int | None = None,
        stop_position: int | None = None,
        require_fde: bool = True,
        skip: frozenset[int] = frozenset(),
        omit_skipped: bool = False,
        known: KnownEvents | None = None,
        observers: list[Any] | None = None,
        decoder: EventDecoder | None = None,
        max_payload: int | str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.start_position = start_position
        self.stop_position = stop_position
        self.require_fde = require_fde
        self.skip = skip
        self.omit_skipped = omit_skipped
        self.known = known
        self.decoder = decoder or EventDecoder(
            self.path, verify_checksum=verify_checksum, decode_rows=decode_rows, max_payload=max_payload
        )
        self.decoder.source = self.path
        if observers:
            self.decoder.state.observers.extend(observers)
        self.position = FIRST_EVENT  # where the next event starts
        self._file_size = 0  # the file's size when last looked up

    def __iter__(self) -> Iterator[Event]:
        with open(self.path, "rb", buffering=READ_BUFFER) as f:
            check_magic(f.read(4), self.path)
            yield from self._events(f)

    def _read_event(self, f: BinaryIO, pos: int) -> tuple[bytes, int] | None:
        """(the event's bytes, its size); only the header when its type is skipped."""
        hlen = self.decoder.header_length
        head = f.read(hlen)
        if not head:
            return None
        if len(head) < hlen:
            raise IncompleteTailError(
                f"incomplete tail at offset {pos}: {len(head)} bytes where an event header needs {hlen}",
                source=self.path,
                offset=pos,
            )
        size = int.from_bytes(head[9:13], "little")
        if size < hlen:
            raise MalformedEventError(
                f"event length {size} is shorter than its {hlen}-byte header",
                event_type=head[4],
                source=self.path,
                offset=pos,
            )
        # The ceiling first: an event over it can never be read, however much the file grows — at
        # the end of a file still being written it is damage, not a tail to wait for (and a header-
        # only scan says so too, the full read would fail there).
        limit = self.decoder.state.max_payload
        if size > limit:
            raise SizeLimitError(
                f"event length {size} is over the {limit}-byte ceiling ({MAX_PAYLOAD_ENV}): "
                "a damaged length, or raise the ceiling",
                size=size,
                limit=limit,
                source=self.path,
                offset=pos,
            )
        # Never ask for more than the file holds: a damaged length must not make us allocate it.
        # The size is looked up again only when an event seems to pass it (the file grows).
        if size > self._file_size - pos:
            self._file_size = os.fstat(f.fileno()).st_size
            if size > self._file_size - pos:
                self._incomplete(pos, size, max(self._file_size - pos, hlen))
        if (
            self.skip
            and self.decoder.fde is not None
            and self.decoder.fde.effective_type(head[4]) in self.skip
        ):
            f.seek(pos + size)
            return head, size
        body = f.read(size - hlen)
        if len(body) < size - hlen:  # the file was cut while we read it
            self._incomplete(pos, size, hlen + len(body))
        return head + body, size

    def _incomplete(self, pos: int, size: int, available: int) -> NoReturn:
        raise IncompleteTailError(
            f"incomplete tail at offset {pos}: event of {size} bytes, file ends after {available}",
            source=self.path,
            offset=pos,
        )

    def _events(self, f: BinaryIO) -> Iterator[Event]:
        pos = FIRST_EVENT
        first = True
        stop = self.stop_position
        # the compiled envelope reads events from a buffer of the file (``buf``, from offset
        # ``base``); what it leaves (None) goes through ``_read_event`` and the reference decoder
        envelope = decoder_module.ENVELOPE.module
        buffered = (
            _Buffered(f, self.decoder, envelope, self.skip, self.omit_skipped, self.known)
            if envelope is not None
            else None
        )
        event: Event | None = None
        while True:
            if stop is not None and pos >= stop:
                return
            if buffered is not None and not first:
                run, end, error = buffered.run(pos, stop)
                if run or error is not None:
                    # while an event is used, ``position`` is its start, as ``next`` has it (a
                    # consumer stopping there resumes at it, not at the events it already used)
                    for event in run:
                        self.position = event.offset
                        yield event
                    pos = self.position = end
                    run, event = [], None  # neither held while the next events are decoded
                    if error is not None:  # decoding the event after them failed: now it is next
                        raise error
                    continue
                event, pos = buffered.next(pos, stop)
                self.position = pos
                if stop is not None and pos >= stop:
                    return
                if event is not None:
                    yield event
                    if type(event.body) is TransactionPayload:
                        yield from self.decoder.inner_events(event)
                    pos += event.header.event_size
                    self.position = pos
                    event = None
                    continue
                f.seek(pos)
            got = self._read_event(f, pos)
            if got is None:
                return
            raw, size = got
            if first and self.start_position is not None and pos < self.start_position < pos + size:
                raise NotAnEventStartError(  # inside the FORMAT_DESCRIPTION read first
                    f"start position {self.start_position} is not the start of an event: the nearest "
                    f"are {pos} and {pos + size}",
                    source=self.path,
                    offset=self.start_position,
                )
            if first and raw[4] not in FORMAT_EVENTS and self.require_fde and self.decoder.fde is None:
                raise NoFormatDescriptionError(
                    f"first event is {raw[4]}, not a FORMAT_DESCRIPTION: the file's layout is unknown "
                    "(read it with require_fde=False / --no-require-fde to assume MySQL 5.x v4 events)",
                    source=self.path,
                    offset=pos,
                )
            if len(raw) < size:
                if not self.omit_skipped:
                    yield self.decoder.skipped(raw, pos)
            elif (
                first
                or self.known is None
                or self.decoder.fde is None
                or (buffered is not None and buffered.admitted == pos)  # (its buffer said so)
                or self.known.admit(raw, self.decoder.fde)
            ):
                event = self.decoder.decode_event(raw, pos)
                yield event
                if type(event.body) is TransactionPayload:
                    yield from self.decoder.inner_events(event)
            pos += size
            self.position = pos
            if first and self.start_position is not None and self.start_position > pos:
                self._check_event_start(f, pos, self.start_position)
                f.seek(self.start_position)
                pos = self.position = self.start_position
            first = False

    def _written_at(self, f: BinaryIO, start: int, hlen: int) -> bool:
        """Whether a v4 event the server wrote starts at ``start``: its header records its end at
        its own offset plus its length and, with checksums, its CRC32 holds (bytes inside an event
        that happen to look like a header would need both)."""
        fde = self.decoder.fde
        f.seek(start)
        head = f.read(hlen)
        size = int.from_bytes(head[9:13], "little") if len(head) == hlen else 0
        if size < hlen or int.from_bytes(head[13:17], "little") != start + size:
            return False
        if fde is None or not fde.checksum_size:
            return fde is not None
        if size > self.decoder.state.max_payload:
            return False
        rest = f.read(size - hlen)
        if len(rest) != size - hlen or len(rest) < 4:
            return False
        return crc32(head + rest[:-4]) == int.from_bytes(rest[-4:], "little")

    def _check_event_start(self, f: BinaryIO, pos: int, start: int) -> None:
        """Refuse a ``start_position`` that is not an event's first byte — else the bytes there
        would be read as a damaged event. An event the server wrote there (``_written_at``: a
        heuristic, its recorded end and its checksum) is taken without a walk (a range of a big
        file starts far in). Else walk the event headers from ``pos`` (lengths only:
        ``walk_headers``) and name the event starts around it (a relay log's events carry the
        source's positions)."""
        hlen = self.decoder.header_length
        if hlen >= 17 and self._written_at(f, start, hlen):
            return
        before, pos, ended = walk_headers(f, pos, start, hlen)
        if ended:  # the end of the file, or a damaged event: no start is known past it
            before, pos = pos, -1
        if pos < 0:
            raise NotAnEventStartError(
                f"start position {start} is past the last event (the events end at {before})",
                source=self.path,
                offset=start,
            )
        if pos != start:
            raise NotAnEventStartError(
                f"start position {start} is not the start of an event: the nearest are {before} and {pos}",
                source=self.path,
                offset=start,
            )


class KnownEvents:
    """What a reader that omits skipped events may also drop from an event's bytes, before decoding
    it: each ``BEGIN`` (every transaction of a MySQL binlog has one), and a TABLE_MAP whose body
    (after the header, before the checksum) is in ``maps`` — the pass adds each map it decodes and
    clears them when what a map means may have changed (after DDL). The compiled path hops over
    them in C (``_fastenv.hop``); this is the reference the pure path and the checks use."""

    def __init__(self) -> None:
        self.maps: set[bytes] = set()

    def admit(self, raw: bytes, fde: Any) -> bool:
        hlen, tail = fde.header_length, len(raw) - fde.checksum_size
        code = fde.effective_type(raw[4])
        if code == EventType.QUERY:
            post = fde.post_header_len(EventType.QUERY, 13)
            if post < 13 or hlen + post > tail:
                return True
            status, db = int.from_bytes(raw[hlen + 11 : hlen + 13], "little"), raw[hlen + 8]
            return raw[hlen + post + status + db + 1 : tail] != b"BEGIN"
        if code == EventType.TABLE_MAP:
            body = raw[hlen:tail]
            if body in self.maps:
                return False
            self.maps.add(body)
        return True


WALK_CHUNK = 1 << 20  # what a header walk reads at a time (the file is never held, nor mapped, whole)


def walk_headers(f: BinaryIO, pos: int, limit: int, hlen: int) -> tuple[int, int, bool]:
    """Walk the event headers of open file ``f`` by their lengths from ``pos`` (an event start) to
    the first event start at or past ``limit``: (the last start before it, where the walk
    stopped, whether it stopped early: at the end of the file or at a length shorter than a
    header). In C a chunk at a time where compiled (a range of a big file starts far in)."""
    envelope = decoder_module.ENVELOPE.module
    before = pos
    while pos < limit:
        f.seek(pos)
        if envelope is not None:
            chunk = f.read(WALK_CHUNK)
            before, pos, why = envelope.walk(chunk, pos, pos, limit, hlen)
            if why == 2 or (why == 1 and len(chunk) < WALK_CHUNK):
                return before, pos, True
            continue
        head = f.read(hlen)
        size = int.from_bytes(head[9:13], "little") if len(head) == hlen else 0
        if size < hlen:
            return before, pos, True
        before, pos = pos, pos + size
    return before, pos, False


class _Buffered:
    """The compiled path: events decoded from a buffer of the file (``buf``, from offset ``base``);
    skipped ones hopped over in it (their header alone made an event, or with ``omit`` nothing at
    all). ``next`` returns None for what the reader's own path must read (with its checks and
    errors), the file then anywhere."""

    def __init__(
        self,
        f: BinaryIO,
        decoder: EventDecoder,
        compiled: Any,
        skip: frozenset[int],
        omit: bool,
        known: KnownEvents | None,
    ) -> None:
        self.f, self.decoder, self.skip, self.omit, self.known = f, decoder, skip, omit, known
        self.fast, self.hop, self.max = compiled.next_event, compiled.hop, decoder.state.max_payload
        # runs of a plain transaction's events in one call, where every event is read
        self.events = None if skip or omit or known is not None else compiled.next_events
        self.buf, self.base = b"", 0
        self.fde: Any = None
        self.codes = bytes(256)  # 1 for each type code skipped under ``fde``
        self.hop_layout: tuple[Any, ...] = ()  # the rest of ``hop``'s arguments under ``fde``
        self.admitted = -1  # the last event ``known`` admitted (it remembers a map as it admits it)

    def next(self, pos: int, stop: int | None) -> tuple[Event | None, int]:
        """The event at ``pos`` (or, omitting skipped events, the first one not skipped before
        ``stop``) and where it starts."""
        while True:
            if self.omit and self._refresh() is not None:  # hop over what is not read, in C
                i = pos - self.base
                limit = len(self.buf) if stop is None else min(len(self.buf), stop - self.base)
                pos += self.hop(self.buf, i, limit, *self.hop_layout) - i
                if stop is not None and pos >= stop:
                    return None, pos
            got = self._one(pos)
            if got is False:  # not all in the buffer: read on from here
                self.buf = b""  # (not held while the next is read)
                self.f.seek(pos)
                self.buf, self.base = self.f.read(FAST_CHUNK), pos
                got = self._one(pos)
            if got is None or isinstance(got, bool):
                return None, pos
            if not isinstance(got, int):
                return got, pos
            pos += got  # an omitted event's size
            if stop is not None and pos >= stop:
                return None, pos

    def run(self, pos: int, stop: int | None) -> tuple[list[Event], int, BaseException | None]:
        """The events of a plain transaction at ``pos`` (before ``stop``) that the buffer holds,
        decoded in one call (``_fastenv.next_events``): (the events, where the next starts, the
        error decoding that one raised, to raise once the events before it are used). Nothing
        where a pass skips or omits events, or where ``next`` reads the next event alone."""
        if self.events is None:
            return [], pos, None
        limit = (1 << 62) if stop is None else stop
        return self.events(self.decoder, self.buf, pos - self.base, pos, limit, RUN_BYTES)  # type: ignore[no-any-return]

    def _one(self, pos: int) -> Event | int | bool | None:
        i = pos - self.base
        if self.skip:
            size = self._skipped_size(i)
            if size > 0:
                if self.omit:
                    return size
                return self.decoder.skipped(self.buf[i : i + self.decoder.header_length], pos)
            if size == 0:
                return False
        if self.known is not None and self.decoder.fde is not None and self.admitted != pos:
            buf = self.buf
            size = int.from_bytes(buf[i + 9 : i + 13], "little") if len(buf) - i >= 13 else 0
            if 0 < size <= len(buf) - i:
                if not self.known.admit(buf[i : i + size], self.decoder.fde):
                    return size
                self.admitted = pos  # admitted once: the reader's own path may decode it next
        return self.fast(self.decoder, self.buf, i, pos)  # type: ignore[no-any-return]

    def _refresh(self) -> Any:
        """The current format event; the hop's codes and layout made again when it changed (a
        permutation changes which codes the types are)."""
        fde = self.decoder.fde
        if fde is not None and fde is not self.fde:
            self.fde = fde
            codes = bytes(self._code(fde.effective_type(c)) for c in range(256))
            maps = self.known.maps if self.known is not None else None
            query_post = fde.post_header_len(EventType.QUERY, 13)
            self.codes = codes
            self.hop_layout = (codes, fde.header_length, self.max, fde.checksum_size, query_post, maps)
        return fde

    def _code(self, kind: int) -> int:
        """What the compiled hop does with an event type (``_fastenv.hop``): 1 skip it, 2 and 3
        drop a BEGIN and a known TABLE_MAP (with ``known``), 0 stop."""
        if kind in self.skip:
            return 1
        if self.known is not None:
            return 2 if kind == EventType.QUERY else 3 if kind == EventType.TABLE_MAP else 0
        return 0

    def _skipped_size(self, i: int) -> int:
        """The size of a skipped event at ``buf[i]``; 0: the buffer does not hold all of it; -1: not
        skipped, or a length the reader has something to say about."""
        fde, buf = self._refresh(), self.buf
        if fde is None:
            return -1
        hlen = fde.header_length
        if len(buf) - i < hlen:
            return 0
        if self.codes[buf[i + 4]] != 1:
            return -1
        size = int.from_bytes(buf[i + 9 : i + 13], "little")
        if size < hlen or size > self.max:
            return -1
        return size if size <= len(buf) - i else 0


def read_events(path: str | os.PathLike[str], **options: object) -> Iterator[Event]:
    """All events of a binlog file (see ``BinlogReader`` for the options). A missing file or a
    directory is a ``SeriesError``, as it is to ``binlake.transactions``."""
    if os.path.isdir(path) or not os.path.exists(path):
        what = "a directory, not a binlog file" if os.path.isdir(path) else "no such binlog file"
        raise SeriesError(
            f"{what} (a directory of binlogs is read by binlake.transactions(...) or "
            "binlake.open_series(...).events())",
            source=os.fspath(path),
        )
    return iter(BinlogReader(path, **options))  # type: ignore[arg-type]
