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

from binlake.values._bytes cimport le

from binlake.events._fastenv import decode_event, xa_id, xa_statement
from binlake.events.control import XaPrepare, Xid
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.txn import COMMIT, DDL, XA_PREPARE, apply_statement

cdef extern from "zlib.h":
    unsigned long crc32(unsigned long crc, const unsigned char *buf, unsigned int length) nogil

# what globalbinlog.nodes expects of this module (a build older than the source is not used)
INTERFACE = 1

cdef enum:
    HLEN = 19

cdef int QUERY = EventType.QUERY
cdef int TABLE_MAP = EventType.TABLE_MAP
cdef int GTID = EventType.GTID
cdef int ANONYMOUS_GTID = EventType.ANONYMOUS_GTID
cdef int GTID_TAGGED = EventType.GTID_TAGGED
cdef int POLARDBX_SEQUENCE = EventType.POLARDBX_SEQUENCE
cdef int POLARDBX_GCN = EventType.POLARDBX_GCN


cdef inline bint crc_ok(const unsigned char *s, Py_ssize_t size) noexcept:
    """Whether the event of ``size`` bytes at ``s`` ends with the CRC32 of its other bytes."""
    return <uint32_t>crc32(0, s, <unsigned int>(size - 4)) == <uint32_t>le(s + size - 4, 4)


def run(scan, decoder, bytes buf, Py_ssize_t i, Py_ssize_t base, int csize, int seq, str source,
        frozenset decoded, Py_ssize_t limit):
    """Read the events from ``buf[i]`` (file offset ``base + i``) while this loop takes them:
    (where the next event starts, the transaction the last one finished or None). With None, the
    Python loop reads the event at that place next. ``decoded``: the types the envelope reads
    whole here (``nodes.DIRECT``, table maps)."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), size, end, b, text_at, body_end, status_len, at
    cdef int code
    tso_status = scan._tso_status
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
            xa = xa_statement(buf, text_at, body_end)
            if xa is None:
                return i, None
            ts = le(s + i, 4)
            t = scan._open or scan._start(seq, source, le(s + i + 5, 4), ts, pos)
            kind = apply_statement(t, xa[0]._value_, xa[1])
            if kind == DDL or (not kind and not t.began):  # ``nodes.may_be_ddl``
                raw = scan._raw
                raw.append(len(t.events))
                raw.append(pos)
                raw.append(buf[i:end])
            i = end
            if kind:
                t.commit_exec_time = le(s + b + 4, 4)
                return i, scan._finish(decoder, pos + size, ts, source, kind)
            continue
        if code == GTID or code == ANONYMOUS_GTID or code == GTID_TAGGED:
            if csize and (size < HLEN + 4 or not crc_ok(s + i, size)):
                return i, None
            scan._start(seq, source, le(s + i + 5, 4), le(s + i, 4), pos)
            i = end
            continue
        if code != TABLE_MAP and code not in decoded:
            return i, None
        try:
            ev = decode_event(decoder, buf[i:end], pos)
        except Exception:  # the Python loop decodes it again and hands over
            return i, None
        if ev is None:
            return i, None
        i = end
        if (code == POLARDBX_SEQUENCE or code == POLARDBX_GCN) and scan._open is None:
            if not scan._pending:
                scan._pending_seq = seq
            scan._pending.append(ev)
            continue
        t = scan._open or scan._start(seq, source, le(s + at + 5, 4), le(s + at, 4), pos)
        t.events.append(ev)
        body = ev.body
        if isinstance(body, TableMap):
            key = (body.database, body.table)
            if key not in t.tables:
                t.tables.append(key)
        elif isinstance(body, Rows):
            t.rows += body.row_total
        elif isinstance(body, Xid):
            t.xid = body.xid
            return i, scan._finish(decoder, pos + size, le(s + at, 4), source, COMMIT)
        elif isinstance(body, XaPrepare):
            t.xa_id = xa_id(body.format_id, body.gtrid, body.bqual)  # the XaId, not tracked
            return i, scan._finish(decoder, pos + size, le(s + at, 4), source, XA_PREPARE)
