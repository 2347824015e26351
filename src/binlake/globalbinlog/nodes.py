"""Reading a data node's binlogs for the merge, decoding only what the merge needs (issue #17: make
reading the nodes the fast part).

A node transaction is mostly envelope: GTID, ``XA START``, ``XA END``, ``XA PREPARE``, a TSO carrier,
later ``XA COMMIT`` — about five events for one row event. The general reader decodes each into
objects and groups them with the general grouper; here one loop walks the file's bytes and
- GTID events: checked (CRC32) and not decoded (the merge does not use the node's GTIDs);
- QUERY events: only the statement text is read (what it does to the transaction, the grouper's
  rule ``txn.statement_ends``); the whole event is decoded when its status variables carry a TSO
  (``lizard_*_gcn``) or its transaction turns out to be DDL (the statement is the body);
- everything else (XA_PREPARE, XID, TSO carriers, table maps, control events) through the general
  decoder, rows with ``decode_rows`` off: their images stay bytes (``body.NodeBody``).
The transactions equal the general path's in what the merge reads of them (kind, place, XA id, XID,
tables, the events the sorter looks at and the body); not filled: the GTID fields and ``rows``.

Anything outside the plain MySQL/PolarDB-X layout this loop knows (no FORMAT_DESCRIPTION, a MariaDB
or v1/v3 file, compressed transaction payloads, encryption, an incomplete tail, damage of any kind)
hands over to the general reader at the start of the transaction it was in: the general path then
does what it always did, errors included.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from binlake import decoder as decoder_module
from binlake import native
from binlake.decoder import DECODE_FAILURES, EventDecoder
from binlake.errors import BinlogError, IncompleteTailError
from binlake.events import BODY_DECODERS
from binlake.events.base import Event, EventHeader
from binlake.events.control import Rotate, XaPrepare, Xid
from binlake.events.query import Query, parse_status_vars
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.events.types import ROWS_EVENT_KINDS, EventType
from binlake.reader import BINLOG_MAGIC
from binlake.series import BinlogSeries, Position, check_magic_of
from binlake.sizes import max_payload
from binlake.statements import Kind, XaId
from binlake.tail import just_created
from binlake.txn import (
    COMMIT,
    CONTROL_EVENTS,
    DDL,
    UNFINISHED,
    XA_PREPARE,
    Transaction,
    TransactionGrouper,
    apply_statement,
    statement_ends,
)

# the loop below in C for the events every node transaction repeats (optional: the reference is here)
NODE_LOOP = native.OptionalModule("binlake.globalbinlog._fastnodes", 4)


def _keep_in(*objects: object) -> None:
    """Without the compiled module every object stays with the cycle collector."""


# objects that cannot be part of a reference cycle, left out of the cycle collector (see ``sorter``)
leave_out: Callable[..., None] = _keep_in if NODE_LOOP.built is None else NODE_LOOP.built.leave_out

HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, log_pos, flags
_QUERY_HEADER = struct.Struct("<I1xII")  # timestamp, server_id, event_size
unpack_query_header = _QUERY_HEADER.unpack_from
HLEN = 19
CHUNK = 4 << 20
SKIPPED_GTIDS = frozenset({EventType.GTID, EventType.ANONYMOUS_GTID, EventType.GTID_TAGGED})
CARRIERS = frozenset({EventType.POLARDBX_GCN, EventType.POLARDBX_SEQUENCE})
# what the loop leaves to the general reader: packed or encrypted events, other flavours' envelopes
UNKNOWN_HERE = frozenset(
    {
        EventType.START_V3,
        EventType.TRANSACTION_PAYLOAD,
        EventType.MARIA_GTID,
        EventType.MARIA_START_ENCRYPTION,
        EventType.PERCONA_START_ENCRYPTION,
    }
)
TSO_STATUS = ("lizard_commit_gcn", "lizard_prepare_gcn")
QUERY = int(EventType.QUERY)
# bodies decoded without the decoder's envelope: they read nothing of its state but the layout and
# the table maps, and change none of it (CRC32 checked here as the decoder checks it)
DIRECT = {
    int(code): BODY_DECODERS[code]
    for code in (
        EventType.XID,
        EventType.XA_PREPARE,
        EventType.POLARDBX_SEQUENCE,
        EventType.POLARDBX_GCN,
        *(c for c, (_, version, compressed) in ROWS_EVENT_KINDS.items() if version and not compressed),
    )
}


def may_be_ddl(t: Transaction, kind: str | None) -> bool:
    """Whether the open transaction ``t`` ends as DDL, or still may, after a statement that did
    ``kind`` to it (``txn.statement_ends``: once begun it never does): its QUERY events are kept
    raw only then."""
    return kind == DDL or (not kind and not t.began)


def _pure_crc_matches(buf: bytes, start: int, end: int) -> bool:
    """Whether the event ``buf[start:end]`` ends with the CRC32 of its other bytes."""
    return zlib.crc32(memoryview(buf)[start : end - 4]) == int.from_bytes(buf[end - 4 : end], "little")


class _HandOver(Exception):
    """Left to the general reader from ``Scan.resume`` on."""


def node_transactions(
    files: list[Path], require_fde: bool = True, start: tuple[int, int] | None = None
) -> Iterator[Transaction]:
    """A node's complete transactions in binlog order, from ``start`` (file index, offset), rows not
    decoded. The last file may end inside an event (the node is still writing it): what is complete
    before that comes out, the rest waits — also when it is not even 4 bytes long yet."""
    files = list(files)
    if files:
        check_magic_of(files[-1], active=True)  # garbage is refused, a prefix of the magic waits
        if just_created(files[-1], active=True):
            files.pop()
    if not files:
        return
    series = BinlogSeries.open(*files)
    scan = Scan(series)
    try:
        yield from scan.transactions(start)
        return
    except _HandOver:
        pass
    yield from general_transactions(series, require_fde, scan.resume, decode_rows=False)


def general_transactions(
    series: BinlogSeries, require_fde: bool, start: tuple[int, int] | None, decode_rows: bool = True
) -> Iterator[Transaction]:
    """The same with the general reader and grouper (any layout binlake reads)."""
    g = TransactionGrouper(keep_events=True)
    at = Position(start[0], str(series.files[start[0]]), start[1]) if start else None
    try:
        for seq, ev in series.events(start=at, require_fde=require_fde, decode_rows=decode_rows):
            for t in g.feed(seq, ev):
                if t.kind != UNFINISHED:
                    yield t
    except IncompleteTailError as e:
        if e.source != str(series.files[-1]):
            raise


class Scan:
    """The loop over a node's files; ``resume`` is where the general reader takes over."""

    def __init__(self, series: BinlogSeries) -> None:
        self.series = series
        self.resume: tuple[int, int] | None = None
        self.limit = max_payload()
        self._tso_status: dict[bytes, bool] = {}  # status variable bytes -> whether they carry a TSO
        self._open: Transaction | None = None  # the transaction being read: its events so far
        # its QUERY events not decoded, kept raw in case it ends as DDL (the statement is the body):
        # flat, (index in its events, offset, bytes) per event, one list for every transaction
        self._raw: list[int | bytes] = []
        self._pending: list[Event] = []  # TSO carriers met between transactions
        self._pending_seq = 0  # the file of the first of them

    def transactions(self, start: tuple[int, int] | None) -> Iterator[Transaction]:
        self.series._check_numbering()
        files = self.series.files
        for seq, path in enumerate(files):
            if start is not None and seq < start[0]:
                continue
            skip_to = start[1] if start is not None and seq == start[0] else 0
            nxt = files[seq + 1].name if seq + 1 < len(files) else None
            yield from self._file(seq, path, skip_to, nxt)

    def _hand_over(self, seq: int, pos: int) -> _HandOver:
        """Hand over at the open transaction's start (or the first carrier before it, or here)."""
        if self._open is not None:
            t = self._open
            self.resume = (t.file_seq, t.start)
        elif self._pending:
            self.resume = (self._pending_seq, self._pending[0].offset)
        else:
            self.resume = (seq, pos)
        return _HandOver()

    def _file(self, seq: int, path: Path, skip_to: int, next_name: str | None) -> Iterator[Transaction]:
        source = str(path)
        dec = EventDecoder(source, decode_rows=False)
        state = dec.state
        # the compiled envelope (None: pure): an event's header, CRC, body and ``Event`` in one call
        envelope = decoder_module.ENVELOPE.module
        fast = None if envelope is None else envelope.decode_event
        unpack = HEADER.unpack_from
        crc_matches = _pure_crc_matches if envelope is None else envelope.crc_matches
        # canonical XA statements read from their bytes (None: the text goes through ``statement_ends``)
        xa_statement = None if envelope is None else envelope.xa_statement
        # the compiled loop (``_fastnodes.run``): it reads what it can and returns here for the rest
        loop = NODE_LOOP.module
        run = None if envelope is None or loop is None else loop.run
        in_c = frozenset(DIRECT)
        with open(path, "rb") as f:
            if f.read(4) != BINLOG_MAGIC:
                raise self._hand_over(seq, 4)
            buf, base, i = f.read(CHUNK), 4, 0
            csize = -1  # not known before the FORMAT_DESCRIPTION
            rotate: Rotate | None = None
            rotate_at = 0
            while True:
                if run is not None and csize >= 0:
                    i, done = run(self, dec, buf, i, base, csize, seq, source, in_c, self.limit)
                    if done is not None:
                        yield done
                        continue
                if len(buf) - i < HLEN:
                    buf, base, i = buf[i:] + f.read(CHUNK), base + i, 0
                    if not buf:
                        break
                    if len(buf) < HLEN:  # an incomplete tail
                        raise self._hand_over(seq, base)
                pos = base + i
                ts, code, server_id, size, log_pos, flags = unpack(buf, i)
                if size < HLEN or size > self.limit:
                    raise self._hand_over(seq, pos)
                if len(buf) - i < size:
                    buf, base, i = buf[i:] + f.read(max(CHUNK, size)), pos, 0
                    if len(buf) < size:
                        raise self._hand_over(seq, pos)
                end = i + size
                if csize < 0:  # the first event: the layout, or hand over
                    csize = self._format(dec, buf[i:end], pos)
                    if csize < 0:
                        raise self._hand_over(seq, pos)
                    i = self._skip(seq, buf, base, end, skip_to)
                    continue
                if code == QUERY or code in SKIPPED_GTIDS:
                    if csize and not crc_matches(buf, i, end):
                        raise self._hand_over(seq, pos)
                    if code == QUERY:
                        out = self._query(dec, seq, source, buf, i, end - csize, pos, xa_statement)
                        if out is not None:
                            yield out
                    else:
                        self._start(seq, source, server_id, ts, pos)
                    i = end
                    continue
                if code in UNKNOWN_HERE:
                    raise self._hand_over(seq, pos)
                decode = DIRECT.get(code)
                try:
                    if fast is not None:  # every event of the decoder in C (it checks the CRC)
                        ev = fast(dec, buf[i:end], pos) or dec.decode_event(buf[i:end], pos)
                        header = ev.header
                    elif decode is None:  # table maps (decoded once per table), control events, …
                        header = EventHeader(ts, code, server_id, size, log_pos, flags)
                        ev = dec.decode_event(buf[i:end], pos, header)
                    else:  # the decoder's path for a body that changes no decoding state
                        header = EventHeader(ts, code, server_id, size, log_pos, flags)
                        checksum = None
                        if csize:
                            checksum = int.from_bytes(buf[end - 4 : end], "little")
                            if not crc_matches(buf, i, end):
                                raise self._hand_over(seq, pos)
                        body = decode(buf[i + HLEN : end - csize], state, header)
                        ev = Event(header, body, source, pos, checksum, None, code)
                except BinlogError:
                    raise self._hand_over(seq, pos) from None
                except DECODE_FAILURES:
                    raise self._hand_over(seq, pos) from None
                i = end
                if code in CONTROL_EVENTS:
                    if code == EventType.FORMAT_DESCRIPTION:
                        csize = self._format(dec, None, pos)
                        if csize < 0:
                            raise self._hand_over(seq, pos)
                    if isinstance(ev.body, Rotate) and log_pos != 0:
                        rotate, rotate_at = ev.body, pos
                    if code in (EventType.ROTATE, EventType.STOP) and self._open is not None and log_pos != 0:
                        self._open = None  # a transaction never spans files: unfinished, left out
                    continue
                if code in CARRIERS and self._open is None:
                    self._pending_seq = seq if not self._pending else self._pending_seq
                    self._pending.append(ev)
                    continue
                t = self._open or self._start(seq, source, server_id, ts, pos)
                t.events.append(ev)
                b = ev.body
                if isinstance(b, TableMap):
                    if (b.database, b.table) not in t.tables:
                        t.tables.append((b.database, b.table))
                elif isinstance(b, Rows):
                    t.rows += b.row_total
                elif isinstance(b, Xid):
                    t.xid = b.xid
                    yield self._finish(dec, pos + size, ts, source, COMMIT)
                elif isinstance(b, XaPrepare):
                    t.xa_id = XaId(b.format_id, b.gtrid, b.bqual)
                    yield self._finish(dec, pos + size, ts, source, XA_PREPARE)
                elif isinstance(b, Query):  # a statement event of another type (EXECUTE_LOAD_QUERY)
                    kind = statement_ends(t, b.query)
                    if kind:
                        t.commit_exec_time = b.exec_time
                        yield self._finish(dec, pos + size, ts, source, kind)
        if (
            self.series.check_links
            and rotate is not None
            and next_name is not None
            and rotate.next_file.rsplit("/", 1)[-1] != next_name
        ):
            raise self._hand_over(seq, rotate_at)  # the general reader says what is wrong

    @staticmethod
    def _format(dec: EventDecoder, raw: bytes | None, pos: int) -> int:
        """Read the FORMAT_DESCRIPTION (``raw``; None: already decoded): the checksum size, or -1
        when the file is not in the layout this loop reads."""
        if raw is not None:
            if raw[4] != EventType.FORMAT_DESCRIPTION:
                return -1
            try:
                dec.decode_event(raw, pos)
            except BinlogError:
                return -1
        fde = dec.fde
        if (
            fde is None
            or fde.binlog_version != 4
            or fde.header_length != HLEN
            or fde.event_type_permutation is not None
            or fde.is_mariadb
            or fde.post_header_len(EventType.QUERY, 13) != 13
        ):
            return -1
        return fde.checksum_size

    def _skip(self, seq: int, buf: bytes, base: int, i: int, skip_to: int) -> int:
        """Walk event lengths from ``i`` to ``skip_to`` (where a previous read stopped): it must be
        an event start in this chunk, else the general reader takes over (and says what is wrong)."""
        while base + i < skip_to:
            size = int.from_bytes(buf[i + 9 : i + 13], "little") if len(buf) - i >= HLEN else 0
            if size < HLEN:
                raise self._hand_over(seq, skip_to)
            i += size
        if base + i != skip_to and skip_to:
            raise self._hand_over(seq, skip_to)
        return i

    def _start(self, seq: int, source: str, server_id: int, ts: int, pos: int) -> Transaction:
        """A new transaction at ``pos`` (a GTID first cuts off the open one: unfinished, left out)."""
        events, start = [], pos
        if self._pending:  # the carriers before it are its first events
            events, start = self._pending, min(pos, self._pending[0].offset)
            self._pending = []
        t = Transaction(seq, source, start, server_id=server_id, first_header_ts=ts, events=events)
        self._raw.clear()
        self._open = t
        return t

    def _query(
        self,
        dec: EventDecoder,
        seq: int,
        source: str,
        buf: bytes,
        i: int,
        body_end: int,
        pos: int,
        xa_statement: Callable[[bytes, int, int], tuple[Kind, XaId, bool] | None] | None,
    ) -> Transaction | None:
        """A QUERY event at ``buf[i]`` (CRC32 checked): kept raw unless its status variables carry
        a TSO, its statement applied to the open transaction (``txn.statement_ends``)."""
        b = i + HLEN
        status_len = buf[b + 11] | buf[b + 12] << 8
        text_at = b + 13 + status_len + buf[b + 8] + 1
        if text_at > body_end:
            raise self._hand_over(seq, pos)
        status = buf[b + 13 : b + 13 + status_len]
        tso = self._tso_status.get(status)
        if tso is None:
            try:
                found, _ = parse_status_vars(status)
            except Exception:  # damaged: the general reader reports it
                raise self._hand_over(seq, pos) from None
            tso = self._tso_status[status] = any(found.get(k) is not None for k in TSO_STATUS)
        ts, server_id, size = unpack_query_header(buf, i)
        t = self._open or self._start(seq, source, server_id, ts, pos)
        end = i + size
        if tso:
            try:
                t.events.append(dec.decode_event(buf[i:end], pos))
            except BinlogError:
                raise self._hand_over(seq, pos) from None
        xa = xa_statement(buf, text_at, body_end) if xa_statement is not None else None
        if xa is not None:  # the compiled reading of a canonical XA statement (as ``xa_canonical``)
            kind = apply_statement(t, xa[0]._value_, xa[1])
        else:
            kind = statement_ends(t, buf[text_at:body_end].decode("utf-8", "surrogateescape"))
        if not tso and may_be_ddl(t, kind):
            self._raw += (len(t.events), pos, buf[i:end])
        if not kind:
            return None
        t.commit_exec_time = int.from_bytes(buf[b + 4 : b + 8], "little")
        return self._finish(dec, pos + size, ts, source, kind)

    def _finish(self, dec: EventDecoder, end: int, ts: int, source: str, kind: str) -> Transaction:
        """The open transaction ends with the event ending at ``end`` (header time ``ts``)."""
        t = self._open
        assert t is not None
        t.kind, t.end, t.end_source, t.commit_header_ts = kind, end, source, ts
        raw = self._raw
        if kind == DDL and raw:  # the statement is the body: decode what was left raw, in its place
            for k in range(len(raw) - 3, -1, -3):
                t.events.insert(raw[k], dec.decode_event(raw[k + 2], raw[k + 1]))  # type: ignore[arg-type]
        raw.clear()
        self._open = None
        return t
