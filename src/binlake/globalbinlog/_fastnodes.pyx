# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The merge's node reader loop in C for the events every node transaction repeats (issue #17: make
reading the nodes the fast part): GTID (checked, not decoded), QUERY with a canonical XA statement
and no TSO in its status variables (kept raw), table maps, rows (images not decoded), XA_PREPARE,
XID and TSO carriers (the compiled envelope's events).

The reference is the Python loop (``nodes.Scan._file``): ``run`` does for these events exactly what
it does, with its helpers (``Scan._start``, ``Scan._finish``, ``txn.apply_statement``), and returns
to it at the first event it does not take: another type, a chunk that does not hold the whole event,
a size out of bounds, a CRC32 mismatch, a QUERY whose status variables are new or carry a TSO or
whose statement is not a canonical XA one, anything the envelope leaves to the reference or fails
on. The Python loop then reads that event (and says what is wrong with it) and comes back.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint32_t

from binlake.events._fastenv cimport (
    Maker, XaParts, crc32_of, envelope_checksum_size, event_at, make_xa_id, xa_parse, xa_parts_id,
)
from binlake.values._bytes cimport le

import dataclasses

from binlake.events._fastenv import XA_KIND_VALUES
from binlake.events.control import XaPrepare, Xid
from binlake.events.rows import NOT_ASKED, Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.txn import _ENDS, _GOES_ON, _OPENS, COMMIT, DDL, XA_PREPARE, Transaction

cdef extern from "Python.h":
    int PyObject_GC_IsTracked(object o)
    void PyObject_GC_UnTrack(void *o)

# what globalbinlog.nodes expects of this module (a build older than the source is not used)
INTERFACE = 4

cdef enum:
    HLEN = 19

cdef int QUERY = EventType.QUERY
cdef int TABLE_MAP = EventType.TABLE_MAP
cdef int GTID = EventType.GTID
cdef int ANONYMOUS_GTID = EventType.ANONYMOUS_GTID
cdef int GTID_TAGGED = EventType.GTID_TAGGED
cdef int POLARDBX_SEQUENCE = EventType.POLARDBX_SEQUENCE
cdef int POLARDBX_GCN = EventType.POLARDBX_GCN


# a new Transaction as its ``__init__`` makes it (``Scan._start``'s call), without the Python call
cdef Maker TRANSACTION = Maker(Transaction)
cdef tuple FIELDS = dataclasses.fields(Transaction)
cdef list DEFAULTS = [f.default for f in FIELDS]  # MISSING where the caller gives the value
cdef list FACTORIES = [
    (k, f.default_factory) for k, f in enumerate(FIELDS) if f.default_factory is not dataclasses.MISSING
]
cdef dict AT = {f.name: k for k, f in enumerate(FIELDS)}
cdef Py_ssize_t F_FILE_SEQ = AT["file_seq"], F_SOURCE = AT["source"], F_START = AT["start"]
cdef Py_ssize_t F_SERVER_ID = AT["server_id"], F_FIRST_TS = AT["first_header_ts"], F_EVENTS = AT["events"]


cdef object start(scan, int seq, str source, server_id, ts, pos):
    """``Scan._start``: a new transaction at ``pos``, the carriers met before it first."""
    pending = scan._pending
    at = pos
    if pending:
        events = pending
        first = pending[0].offset
        if first < pos:
            at = first
        scan._pending = []
    else:
        events = []
    values = list(DEFAULTS)
    for k, factory in FACTORIES:
        values[k] = [] if factory is list else factory()
    values[F_FILE_SEQ], values[F_SOURCE], values[F_START] = seq, source, at
    values[F_SERVER_ID], values[F_FIRST_TS], values[F_EVENTS] = server_id, ts, events
    t = TRANSACTION.make(tuple(values))
    raw = scan._raw
    if raw:
        del raw[:]
    scan._open = t
    return t


cdef object finish(scan, decoder, end, ts, str source, str kind):
    """``Scan._finish`` (a DDL, whose raw statements are decoded, goes to it)."""
    if kind == DDL:
        return scan._finish(decoder, end, ts, source, kind)
    t = scan._open
    t.kind, t.end, t.end_source, t.commit_header_ts = kind, end, source, ts
    raw = scan._raw
    if raw:
        del raw[:]
    scan._open = None
    return t


cdef void out_of_the_collector(event, body) noexcept:
    """Leave a body event (a table map, rows not decoded) out of the cycle collector, as CPython
    leaves out tuples of numbers: the merge holds the body events of every piece that waits for its
    watermark (with 16 nodes ~10,000 at a time, 100,000 over the benchmark), and each full
    collection walked them all (most of the reader's CPU then). They cannot be part of a reference
    cycle, so reference counting frees them: an event refers to its header (numbers, untracked
    already), its body and text; a table map body (shared, read only) to its columns; an undecoded
    rows body to its table map, bytes and an empty list it never fills (decoding makes a new body,
    ``rows.decode_deferred``). None refers back to an event or a body."""
    if PyObject_GC_IsTracked(event):
        PyObject_GC_UnTrack(<void *>event)
    if type(body) is Rows:
        if PyObject_GC_IsTracked(body):
            PyObject_GC_UnTrack(<void *>body)
        rows = body.rows
        if type(rows) is list and not rows and PyObject_GC_IsTracked(rows):
            PyObject_GC_UnTrack(<void *>rows)


cdef inline bint crc_ok(const unsigned char *s, Py_ssize_t size) noexcept:
    """Whether the event of ``size`` bytes at ``s`` ends with the CRC32 of its other bytes."""
    return crc32_of(s, size - 4) == <uint32_t>le(s + size - 4, 4)


# ``txn.apply_statement`` of each XA verb (``_fastenv.XA_KIND_VALUES``), read from its tables: how it
# ends the transaction (None: it opens it or goes on), whether it opens it, whether it goes on
cdef tuple XA_ENDS = tuple(_ENDS.get(k) for k in XA_KIND_VALUES)
cdef tuple XA_OPENS = tuple(k in _OPENS for k in XA_KIND_VALUES)
cdef tuple XA_GOES_ON = tuple(k in _GOES_ON for k in XA_KIND_VALUES)
assert all(e is not None or o or g for e, o, g in zip(XA_ENDS, XA_OPENS, XA_GOES_ON))


cdef object apply_xa(t, const unsigned char *s, XaParts *x):
    """``txn.apply_statement(t, kind, xid)`` of a parsed canonical XA statement (an ``XA END``'s id
    is not made: it changes nothing)."""
    if XA_GOES_ON[x.verb]:
        return None
    t.xa_id = xa_parts_id(s, x)
    if XA_OPENS[x.verb]:
        t.began = True
        return None
    return XA_ENDS[x.verb]


def run(scan, decoder, bytes buf, Py_ssize_t i, Py_ssize_t base, int csize, int seq, str source,
        frozenset decoded, Py_ssize_t limit):
    """Read the events from ``buf[i]`` (file offset ``base + i``) while this loop takes them:
    (where the next event starts, the transaction the last one finished or None). With None, the
    Python loop reads the event at that place next. ``decoded``: the types the envelope reads
    whole here (``nodes.DIRECT``, table maps)."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), size, end, b, text_at, body_end, status_len, at
    cdef int code, env_csize
    cdef XaParts xa
    # the envelope's state: no event read here changes it (``_fastenv.envelope_checksum_size``)
    state = decoder.state
    fde = state.fde
    env_csize = envelope_checksum_size(decoder, fde)
    cdef bint verify = state.verify_checksum
    tso_status = scan._tso_status
    raw = scan._raw  # one list for every transaction (cleared, never replaced)
    t = scan._open  # the open transaction (``start`` and ``finish`` keep ``scan._open`` with it)
    while True:
        if n - i < HLEN:
            return i, None
        size = le(s + i + 9, 4)
        if size < HLEN or size > limit or size > n - i:
            return i, None
        code = s[i + 4]
        at, end = i, i + size
        pos = base + i
        if code == QUERY:
            if size < HLEN + 13 + csize or (csize and not crc_ok(s + i, size)):
                return i, None
            b = i + HLEN
            status_len = s[b + 11] | s[b + 12] << 8
            text_at = b + 13 + status_len + s[b + 8] + 1
            body_end = end - csize
            if text_at > body_end or tso_status.get(buf[b + 13 : b + 13 + status_len]) is not False:
                return i, None
            if not xa_parse(s, text_at, body_end, &xa):
                return i, None
            ts = le(s + i, 4)
            if t is None:
                t = start(scan, seq, source, le(s + i + 5, 4), ts, pos)
            kind = apply_xa(t, s, &xa)
            if kind == DDL or (not kind and not t.began):  # ``nodes.may_be_ddl``
                raw.append(len(t.events))
                raw.append(pos)
                raw.append(buf[i:end])
            i = end
            if kind:
                t.commit_exec_time = le(s + b + 4, 4)
                return i, finish(scan, decoder, pos + size, ts, source, kind)
            continue
        if code == GTID or code == ANONYMOUS_GTID or code == GTID_TAGGED:
            if csize and (size < HLEN + 4 or not crc_ok(s + i, size)):
                return i, None
            t = start(scan, seq, source, le(s + i + 5, 4), le(s + i, 4), pos)
            i = end
            continue
        if code != TABLE_MAP and code not in decoded:
            return i, None
        if env_csize < 0:
            return i, None
        try:
            ev = event_at(decoder, state, fde, env_csize, verify, s + i, size, pos)
        except Exception:  # the Python loop decodes it again and hands over
            return i, None
        if ev is None:
            return i, None
        i = end
        if (code == POLARDBX_SEQUENCE or code == POLARDBX_GCN) and t is None:
            if not scan._pending:
                scan._pending_seq = seq
            scan._pending.append(ev)
            continue
        if t is None:
            t = start(scan, seq, source, le(s + at + 5, 4), le(s + at, 4), pos)
        t.events.append(ev)
        body = ev.body
        if code == TABLE_MAP or (type(body) is Rows and body.undecoded_reason == NOT_ASKED):
            out_of_the_collector(ev, body)
        if isinstance(body, TableMap):
            key = (body.database, body.table)
            if key not in t.tables:
                t.tables.append(key)
        elif isinstance(body, Rows):
            counted = body.counted  # ``Rows.row_total`` without the Python call
            t.rows += len(body.rows) if counted is None else counted
        elif isinstance(body, Xid):
            t.xid = body.xid
            return i, finish(scan, decoder, pos + size, le(s + at, 4), source, COMMIT)
        elif isinstance(body, XaPrepare):
            t.xa_id = make_xa_id(body.format_id, body.gtrid, body.bqual)  # the XaId, not tracked
            return i, finish(scan, decoder, pos + size, le(s + at, 4), source, XA_PREPARE)


def leave_out(*objects):
    """Leave ``objects`` out of the cycle collector (``sorter``: a piece and its body, which refer to
    their events, ids and names and are referred to by the sorter and the merge, never back: they
    cannot be part of a reference cycle). Reference counting frees them as before."""
    for o in objects:
        if PyObject_GC_IsTracked(o):
            PyObject_GC_UnTrack(<void *>o)
