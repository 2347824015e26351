# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The per-event envelope in C: the common header, the CRC32 check, the ``Event`` and the bodies
every transaction repeats (GTID, ANONYMOUS_GTID, MariaDB GTID, XID, QUERY), giving exactly the
objects of the pure path (``binlake.decoder.EventDecoder._decode_one``, the reference).

It is a fast path, not a second decoder: anything it does not read itself (other event types,
FORMAT_DESCRIPTION and what changes the stream's layout, v1 headers, permuted type codes, events
inside a TRANSACTION_PAYLOAD) goes to the reference; so does an event it finds anything wrong with
(a bad checksum, a body shorter than its fields, a body decoder's error): the reference then raises
its typed error at its offset. Every read is checked against the end of the buffer first.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.bool cimport PyBool_Check
from cpython.bytes cimport PyBytes_CheckExact
from cpython.float cimport PyFloat_CheckExact
from cpython.long cimport PyLong_CheckExact
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_CheckExact
from cpython.long cimport PyLong_FromUnsignedLongLong
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint32_t, uint64_t

from binlake.values._bytes cimport le

from binlake.events import BODY_DECODERS, ENCRYPTION_STARTS
from binlake.events.base import Event, EventHeader, UnknownEvent
from binlake.events.control import XaPrepare, Xid
from binlake.events.rows import NOT_ASKED, Rows, _header, count_rows_data, decode_rows_data
from binlake.events.gtid import Gtid, MariaGtid, format_uuid
from binlake.events.query import Query, parse_status_vars
from binlake.events.table_map import TableMap
from binlake.events.types import ROWS_EVENT_KINDS
from binlake.events.vendor import PolarxGcn, PolarxSequence
from binlake.statements import Kind, XaId
from binlake.values import plan

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
        int flags
    enum:
        T_OBJECT_EX
        READONLY

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    PyObject *PyType_GenericAlloc(PyTypeObject *tp, Py_ssize_t nitems) except NULL
    int PyObject_GC_IsTracked(object o)
    void PyObject_GC_UnTrack(void *o)

cdef extern from "string.h":
    int memcmp(const void *a, const void *b, size_t n) nogil

# what binlake.decoder expects of this module (a build older than the source is not used)
INTERFACE = 10

# CRC32 (ISO-HDLC, zlib's and MySQL's) eight bytes a step ("slicing by 8"): binlog events are small
# (76 bytes on average in the merge benchmark's nodes), where zlib's ``crc32`` spends ~75 ns an event
# on its set-up and byte loop, this ~20 (tested equal to ``zlib.crc32`` at every length)
cdef uint32_t CRC_TABLE[8][256]


cdef void crc_tables() noexcept:
    cdef uint32_t c
    cdef int i, k
    for i in range(256):
        c = i
        for k in range(8):
            c = (<uint32_t>0xEDB88320 ^ (c >> 1)) if c & 1 else c >> 1
        CRC_TABLE[0][i] = c
    for i in range(256):
        for k in range(1, 8):
            CRC_TABLE[k][i] = (CRC_TABLE[k - 1][i] >> 8) ^ CRC_TABLE[0][CRC_TABLE[k - 1][i] & 0xFF]


crc_tables()


cdef uint32_t crc32_of(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """The CRC32 of the ``n`` bytes at ``p`` (as ``zlib.crc32(bytes)``)."""
    cdef uint32_t c = ~(<uint32_t>0), a, b
    while n >= 8:
        a = (p[0] | <uint32_t>p[1] << 8 | <uint32_t>p[2] << 16 | <uint32_t>p[3] << 24) ^ c
        b = p[4] | <uint32_t>p[5] << 8 | <uint32_t>p[6] << 16 | <uint32_t>p[7] << 24
        c = (
            CRC_TABLE[7][a & 0xFF] ^ CRC_TABLE[6][(a >> 8) & 0xFF] ^ CRC_TABLE[5][(a >> 16) & 0xFF]
            ^ CRC_TABLE[4][a >> 24] ^ CRC_TABLE[3][b & 0xFF] ^ CRC_TABLE[2][(b >> 8) & 0xFF]
            ^ CRC_TABLE[1][(b >> 16) & 0xFF] ^ CRC_TABLE[0][b >> 24]
        )
        p += 8
        n -= 8
    while n > 0:
        c = CRC_TABLE[0][(c ^ p[0]) & 0xFF] ^ (c >> 8)
        p += 1
        n -= 1
    return ~c


def crc32(bytes data):
    """``crc32_of`` from Python (its test against ``zlib.crc32``)."""
    return crc32_of(<const unsigned char *>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))

cdef enum:
    HLEN = 19
    START_V3 = 1
    QUERY = 2
    FORMAT_DESCRIPTION = 15
    XID = 16
    TABLE_MAP = 19
    GTID = 33
    ANONYMOUS_GTID = 34
    MARIA_GTID = 162
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    POLARDBX_SEQUENCE = 80
    POLARDBX_GCN = 105

# the event types the reference must see whole: they change the stream's layout or end it
cdef frozenset REFERENCE_ONLY = frozenset({START_V3, FORMAT_DESCRIPTION}) | frozenset(ENCRYPTION_STARTS)
cdef bint REFERENCE_ONLY_CODE[256]  # the same by type code
for _code in range(256):
    REFERENCE_ONLY_CODE[_code] = _code in REFERENCE_ONLY
cdef dict DECODERS = dict(BODY_DECODERS)
# the rows events read here: v1/v2, not compressed, not partial -> (operation, version)
cdef dict PLAIN_ROWS = {
    code: (op, version)
    for code, (op, version, compressed) in ROWS_EVENT_KINDS.items()
    if version and not compressed and code != PARTIAL_UPDATE_ROWS
}


cdef class Maker:
    """Makes instances of a slots dataclass from all its fields' values, as its ``__init__`` does
    (which sets each slot and nothing else) without the Python call: the slots' offsets are read
    from their member descriptors once. A class not of that shape is called instead. (Its fields
    are declared in ``_fastenv.pxd``: other compiled modules make instances with it too.)"""

    def __init__(self, cls, bint post_init_is_noop=False):
        """``post_init_is_noop``: the values given always make the class's ``__post_init__`` do
        nothing (``Event``'s sets ``kind`` only when it is negative)."""
        import dataclasses
        import types

        self.cls = cls
        self.tp = <PyTypeObject *>cls
        names = [f.name for f in dataclasses.fields(cls)]
        self.names = tuple(names)
        self.n = len(names)
        self.direct = (
            self.n <= 24 and (post_init_is_noop or "__post_init__" not in vars(cls)) and type(cls) is type and cls.__bases__ == (object,)
        )
        for i, name in enumerate(names if self.direct else ()):
            d = vars(cls).get(name)
            if type(d) is not types.MemberDescriptorType:
                self.direct = False
                break
            member = (<PyMemberDescrObject *>d).d_member
            if member.type != T_OBJECT_EX or member.flags & READONLY:
                self.direct = False
                break
            self.offsets[i] = member.offset

    cdef object make(self, tuple values):
        cdef Py_ssize_t i
        cdef PyObject *o
        cdef PyObject *v
        if PyTuple_GET_SIZE(values) != self.n:
            raise TypeError(f"{self.cls.__name__} has {self.n} fields, given {len(values)}")
        if not self.direct:
            return self.cls(*values)
        o = PyType_GenericAlloc(self.tp, 0)  # a class of ``object``'s: its tp_alloc, slots zeroed
        obj = <object>o
        Py_DECREF(obj)  # the reference the allocation gave is the one ``obj`` holds
        cdef bint atomic = True
        for i in range(self.n):
            v = PyTuple_GET_ITEM(values, i)
            Py_INCREF(<object>v)
            (<PyObject **>(<char *>o + self.offsets[i]))[0] = v
            atomic = atomic and is_atomic(v)
        if atomic and PyObject_GC_IsTracked(obj):
            # Only numbers, text, bytes and None in it: it cannot be part of a reference cycle, so
            # it is left out of the cycle collector, as CPython leaves out such tuples and dicts
            # (the merge holds hundreds of thousands of events: each collection walked them all).
            # Nothing stores a container in a header or such a body afterwards.
            PyObject_GC_UnTrack(<void *>o)
        return obj

    cdef Py_ssize_t offset_of(self, str name) except -2:
        """Where the field ``name`` is in an instance of exactly the class, for ``slot``; -1 when
        the class is not of the shape ``make`` writes directly (read it by name)."""
        if not self.direct:
            return -1
        return self.offsets[self.names.index(name)]


cdef inline bint is_atomic(PyObject *v) noexcept:
    """A value that refers to no other object (the empty tuple included)."""
    return (
        v == <PyObject *>None
        or PyLong_CheckExact(<object>v)
        or PyUnicode_CheckExact(<object>v)
        or PyBytes_CheckExact(<object>v)
        or PyBool_Check(<object>v)
        or PyFloat_CheckExact(<object>v)
        or (PyTuple_CheckExact(<object>v) and PyTuple_GET_SIZE(<object>v) == 0)
    )


cdef Maker HEADER = Maker(EventHeader)
cdef Maker EVENT = Maker(Event, True)
cdef Maker GTID_ = Maker(Gtid)
cdef Maker QUERY_ = Maker(Query)
cdef Maker XID_ = Maker(Xid)
cdef Maker MARIA_GTID_ = Maker(MariaGtid)
cdef Maker ROWS = Maker(Rows)
cdef Maker XA_PREPARE_ = Maker(XaPrepare)
cdef Maker POLARX_SEQUENCE = Maker(PolarxSequence)
cdef Maker POLARX_GCN = Maker(PolarxGcn)
# (other compiled modules read these classes' slots at the offsets their Maker found)
MAKERS = {EventHeader: HEADER, Event: EVENT, Gtid: GTID_, Query: QUERY_, Xid: XID_, Rows: ROWS}
cdef Maker XA_ID = Maker(XaId)


class _Short(Exception):
    """A fixed part does not fit: the reference decides what the event is."""


cdef inline object text(const unsigned char *s, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char *>s, n, "surrogateescape")


# the last GTID's source uuid, as bytes and as text: a binlog's transactions come from one server
# or few, and each made its 16 bytes and called ``format_uuid`` again
cdef bytes LAST_UUID = b""
cdef str LAST_UUID_TEXT = ""


cdef str source_uuid(const unsigned char *s):
    """``format_uuid`` of the 16 bytes at ``s``."""
    global LAST_UUID, LAST_UUID_TEXT
    if PyBytes_GET_SIZE(LAST_UUID) == 16 and memcmp(PyBytes_AS_STRING(LAST_UUID), s, 16) == 0:
        return LAST_UUID_TEXT
    raw = PyBytes_FromStringAndSize(<const char *>s, 16)
    text = format_uuid(raw)
    LAST_UUID, LAST_UUID_TEXT = raw, text
    return text


cdef object gtid_body(bytes buf, bint anonymous):
    """``events.gtid.decode_gtid``; ``_Short`` where it raises ``ShortRead``."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), p
    cdef uint64_t ts, v
    if n < 25:
        raise _Short()
    flags, sid, gno = s[0], source_uuid(s + 1), PyLong_FromUnsignedLongLong(le(s + 17, 8))
    if n <= 25 or s[25] != 2:  # no logical clock (before MySQL 5.7.5)
        return GTID_.make((flags, sid, gno, anonymous, None, None, None, None, None, None, None, None, None, (), 0))
    if n < 42:
        raise _Short()
    last_committed = PyLong_FromUnsignedLongLong(le(s + 26, 8))
    sequence_number = PyLong_FromUnsignedLongLong(le(s + 34, 8))
    p = 42
    immediate = original = length = immediate_version = original_version = ticket = None
    if n - p >= 7:
        ts = le(s + p, 7)
        p += 7
        if ts & (<uint64_t>1 << 55):
            immediate = PyLong_FromUnsignedLongLong(ts & ~(<uint64_t>1 << 55))
            if n - p < 7:
                raise _Short()
            original = PyLong_FromUnsignedLongLong(le(s + p, 7))
            p += 7
        else:
            immediate = original = PyLong_FromUnsignedLongLong(ts)
    if n - p > 0:
        v = s[p]
        p += 1
        if v == 0xFC or v == 0xFD or v == 0xFE:
            width = 2 if v == 0xFC else 3 if v == 0xFD else 8
            if n - p < width:
                raise _Short()
            v = le(s + p, width)
            p += width
        elif v >= 0xFB:  # NULL or 0xff where a length is expected
            raise _Short()
        length = PyLong_FromUnsignedLongLong(v)
    if n - p >= 4:
        v = le(s + p, 4)
        p += 4
        if v & (<uint64_t>1 << 31):
            immediate_version = v & ~(<uint64_t>1 << 31)
            if n - p < 4:
                raise _Short()
            original_version = le(s + p, 4)
            p += 4
        else:
            immediate_version = original_version = v
    if n - p >= 8:
        ticket = PyLong_FromUnsignedLongLong(le(s + p, 8))
    return GTID_.make((
        flags, sid, gno, anonymous, None, last_committed, sequence_number, immediate, original, length,
        immediate_version, original_version, ticket, (), 0,
    ))


cdef object maria_gtid_body(bytes buf, object server_id):
    """``events.gtid.decode_maria_gtid`` (an XA GTID goes to the reference)."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), p = 13
    cdef int flags
    if n < 13:
        raise _Short()
    flags = s[12]
    commit_id = flags_extra = None
    if flags & 2:  # MARIA_FL_GROUP_COMMIT_ID
        if n - p < 8:
            raise _Short()
        commit_id = PyLong_FromUnsignedLongLong(le(s + p, 8))
        p += 8
    elif flags & (64 | 128):  # an XA transaction's id: the reference reads it
        raise _Short()
    else:
        p += 6 if n - p >= 6 else n - p  # reserved zeros
    extra = b""
    if n - p > 0:
        flags_extra = s[p]
        extra = buf[p + 1 :]
    return MARIA_GTID_.make((
        PyLong_FromUnsignedLongLong(le(s, 8)), le(s + 8, 4), server_id, flags, commit_id, None, None, None,
        flags_extra, extra,
    ))


cdef object query_body(bytes buf, int post):
    """``events.query.decode_query`` of a plain QUERY event (``post``: its post-header length)."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), p, status_len, db_len
    if post < 13 or n < 13:
        raise _Short()
    db_len = s[8]
    status_len = le(s + 11, 2)
    p = post
    if n - p < status_len:
        raise _Short()
    status, tail = parse_status_vars(buf[p : p + status_len])
    p += status_len
    if n - p < db_len + 1:  # the database name and its NUL
        raise _Short()
    database = text(s + p, db_len)
    p += db_len + 1
    return QUERY_.make(
        (le(s, 4), le(s + 4, 4), le(s + 9, 2), database, text(s + p, n - p), status, tail, False, None, b"")
    )


cdef object xa_prepare_body(bytes buf):
    """``events.control.decode_xa_prepare``."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), glen, blen
    if n < 13:
        raise _Short()
    glen, blen = le(s + 5, 4), le(s + 9, 4)
    if glen > 64 or blen > 64 or n - 13 < glen + blen:
        raise _Short()
    return XA_PREPARE_.make((s[0] != 0, le(s + 1, 4), buf[13 : 13 + glen], buf[13 + glen : 13 + glen + blen]))


cdef inline Py_ssize_t post_header_len(object fde, int code, Py_ssize_t default) except -1:
    """``FormatDescription.post_header_len`` without the Python call."""
    cdef bytes lengths = fde.post_header_lengths
    if 0 <= code - 1 < PyBytes_GET_SIZE(lengths):
        return (<const unsigned char *>PyBytes_AS_STRING(lengths))[code - 1]
    return default


cdef object rows_body(bytes buf, object state, object header, int code, object fde, object reference):
    """``events.rows.decode_rows`` of a v1/v2 rows event of a mapped, decodable table (the rest,
    and any doubt, goes to ``reference``, the pure body decoder)."""
    kind = PLAIN_ROWS.get(code)
    read_header = plan.rows_header
    if kind is None or read_header is None:
        return reference(buf, state, header)
    op, version = kind
    post = post_header_len(fde, code, 10 if version == 2 else 8)
    table_id, flags, extra, ncols, before, after, start = read_header(buf, post, version, op, _header)
    tm = state.table_maps.get(table_id)
    if tm is None or tm.undecodable:
        return reference(buf, state, header)
    partition_id = source_partition_id = None
    if len(extra) >= 3 and extra[0] == 1:  # partition info
        partition_id = int.from_bytes(extra[1:3], "little")
        if op == "update" and len(extra) >= 5:
            source_partition_id = int.from_bytes(extra[3:5], "little")
    data = buf[start:]
    ev = ROWS.make((
        op, version, table_id, flags, ncols, before, after, extra, partition_id, source_partition_id, tm, [],
        None, None, False, False, True, None,
    ))
    if state.decode_rows:
        decode_rows_data(ev, data, tm, False)
        return ev
    ev.raw_rows = data
    if state.count_rows:
        ev.counted = count_rows_data(ev, data, tm)
        if ev.counted is None:  # the walk found damage: decoding says what
            ev.raw_rows = None
            decode_rows_data(ev, data, tm, False)
        else:
            ev.undecoded_reason = "rows were counted, not decoded"
    else:
        ev.undecoded_reason = NOT_ASKED
    return ev


cpdef object decode_event(object decoder, bytes raw, Py_ssize_t offset):
    """``decoder.decode_event(raw, offset)`` for an event read from a file or a stream (not inside
    a transaction payload), or None when the reference must read it from the start."""
    state = decoder.state
    fde = state.fde
    cdef int csize = envelope_checksum_size(decoder, fde)
    if csize < 0:
        return None
    return event_at(
        decoder, state, fde, csize, state.verify_checksum,
        <const unsigned char *>PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), offset,
    )


cdef int envelope_checksum_size(object decoder, object fde) except -2:
    """The checksum size of the events ``event_at`` reads in the decoder's state (``fde`` its
    FORMAT_DESCRIPTION), or -1 when the reference must read them all (encrypted, no or another
    layout). A caller may keep it over events that change none of this (not FORMAT_DESCRIPTION
    nor ``REFERENCE_ONLY``, which ``event_at`` leaves to the reference)."""
    if decoder.encrypted_from is not None or fde is None or fde.header_length != HLEN or fde.event_type_permutation is not None:
        return -1
    return 4 if fde.checksum_alg == 1 else 0


cdef tuple observers_of(object state, int code):
    """``state.observers_of(code)`` (``DecodeState``), without the call while its routes are current:
    ``observers`` holds the very objects they were made from."""
    observers = state.observers
    if type(observers) is not list:  # (a list is what the reader makes; anything else, the pure way)
        return state.observers_of(code)
    cdef tuple routed = state.routed
    cdef Py_ssize_t i, n = len(<list>observers)
    if n == 0:
        return ()
    if n == len(routed):
        for i in range(n):
            if <PyObject *>(<list>observers)[i] is not <PyObject *>routed[i]:
                return state.observers_of(code)
        return state.routes[code]
    return state.observers_of(code)


cdef object event_at(
    object decoder, object state, object fde, int csize, bint verify, const unsigned char *s,
    Py_ssize_t n, Py_ssize_t offset,
):
    """``decode_event`` of the ``n`` bytes at ``s`` once ``envelope_checksum_size`` gave ``csize``
    (``verify``: ``state.verify_checksum``); None: the reference reads it."""
    if n < HLEN:
        return None
    cdef int code = s[4]
    if REFERENCE_ONLY_CODE[code]:
        return None
    if n < HLEN + csize:
        return None
    header = HEADER.make((le(s, 4), code, le(s + 5, 4), le(s + 9, 4), le(s + 13, 4), le(s + 17, 2)))
    checksum = None
    cdef uint32_t stored
    if csize:
        stored = <uint32_t>le(s + n - 4, 4)
        if verify and crc32_of(s, n - 4) != stored:
            return decoder._decode_one(PyBytes_FromStringAndSize(<const char *>s, n), header, offset)  # it raises the mismatch
        checksum = stored
    # the body's bytes, but for the bodies of numbers only (two events of every distributed branch)
    body_bytes = None
    if code != XID and code != POLARDBX_SEQUENCE and code != POLARDBX_GCN:
        body_bytes = PyBytes_FromStringAndSize(<const char *>s + HLEN, n - HLEN - csize)
    try:
        if code == GTID or code == ANONYMOUS_GTID:
            body = gtid_body(body_bytes, code == ANONYMOUS_GTID)
        elif code == XID:
            if n - HLEN - csize < 8:
                raise _Short()
            body = XID_.make((PyLong_FromUnsignedLongLong(le(s + HLEN, 8)),))
        elif code == QUERY:
            body = query_body(body_bytes, post_header_len(fde, QUERY, 13))
        elif code == MARIA_GTID:
            body = maria_gtid_body(body_bytes, header.server_id)
        elif code == TABLE_MAP:
            body = None
            if n - HLEN - csize >= 6:  # ``EventDecoder._table_map``'s cache, looked up here
                cached = state.table_map_bytes.get(le(s + HLEN, 6))
                if cached is not None and cached[0] == body_bytes:
                    body = cached[1]
            if body is None:
                body = decoder._table_map(body_bytes, header)
        elif code == XA_PREPARE:
            body = xa_prepare_body(body_bytes)
        elif code == POLARDBX_SEQUENCE or code == POLARDBX_GCN:
            if n - HLEN - csize < 9:
                raise _Short()
            body = (POLARX_SEQUENCE if code == POLARDBX_SEQUENCE else POLARX_GCN).make(
                (s[HLEN], PyLong_FromUnsignedLongLong(le(s + HLEN + 1, 8)))
            )
        else:
            decode = DECODERS.get(code)
            if decode is None:
                body = UnknownEvent(body_bytes)
            elif code in PLAIN_ROWS:
                body = rows_body(body_bytes, state, header, code, fde, decode)
            else:
                body = decode(body_bytes, state, header)
    except Exception:  # damage, or a shape this path leaves to the reference: it says what
        return decoder._decode_one(PyBytes_FromStringAndSize(<const char *>s, n), header, offset)
    event = EVENT.make((header, body, decoder.source, offset, checksum, None, code))
    for observe in observers_of(state, code):
        observe(event)
    if code == TABLE_MAP and isinstance(event.body, TableMap):
        # an observer (the schema tracker) may have put a named view of the map in its place
        state.table_maps[event.body.table_id] = event.body
    return event


def crc_matches(bytes buf, Py_ssize_t start, Py_ssize_t end):
    """Whether the event ``buf[start:end]`` ends with the CRC32 of its other bytes (False when the
    range is not inside ``buf`` or cannot hold a checksum)."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    if start < 0 or end > PyBytes_GET_SIZE(buf) or end - start < 4:
        return False
    return crc32_of(s + start, end - 4 - start) == <uint32_t>le(s + end - 4, 4)


def next_event(decoder, bytes buf, Py_ssize_t i, Py_ssize_t offset):
    """The event starting at ``buf[i]`` (file offset ``offset``) decoded as ``decode_event`` does;
    False when ``buf`` does not hold all of it (read more, or let the reader say why not), None
    when the reference must read it (the reader's own path, with its checks and errors)."""
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), size
    if i < 0 or n - i < HLEN:
        return False
    size = le(<const unsigned char *>PyBytes_AS_STRING(buf) + i + 9, 4)
    if size < HLEN or size > decoder.state.max_payload:  # the reader says what is wrong
        return None
    if size > n - i:
        return False
    return decode_event(decoder, PyBytes_FromStringAndSize(PyBytes_AS_STRING(buf) + i, size), offset)


# the event types a run (``next_events``) reads on past: a plain transaction's (rows events of
# every kind; a QUERY goes on only when it is ``BEGIN``); XID ends a run after it, every other type
# before it (it is read alone)
cdef bint RUN_CODE[256]
for _code in range(256):
    RUN_CODE[_code] = _code in (GTID, ANONYMOUS_GTID, MARIA_GTID, QUERY, TABLE_MAP, XID) or _code in ROWS_EVENT_KINDS


def next_events(decoder, bytes buf, Py_ssize_t i, Py_ssize_t offset, Py_ssize_t limit, Py_ssize_t budget):
    """The events of a plain transaction from ``buf[i]`` (file offset ``offset``) on, each decoded
    as ``next_event`` decodes it, in one call: (the events, where the next one starts, the error
    decoding the next raised or None). It stops after an XID or a QUERY other than ``BEGIN``,
    before an event of any other type, at ``limit`` (an event starting there is not read), before an
    event that would take the bytes of the run past ``budget`` (decoded rows are many times their
    bytes: a run given to a consumer one event at a time holds the events not yet used, which this
    bounds; an event over it is read in a run of its own), and where ``next_event`` would not give
    an event (the buffer does not hold it whole, a length or layout the reader's own path reads). An error is given, not raised, so that the events before
    it are used first, as one call per event would have it; no event past it is read."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), size
    cdef list out = []
    cdef int code, csize
    state = decoder.state
    fde = state.fde
    csize = envelope_checksum_size(decoder, fde)
    if csize < 0:
        return out, offset, None
    cdef unsigned long long max_payload = state.max_payload
    cdef bint verify = state.verify_checksum
    while offset < limit and i >= 0 and n - i >= HLEN:
        code = s[i + 4]
        size = le(s + i + 9, 4)
        if not RUN_CODE[code] or size < HLEN or <unsigned long long>size > max_payload or size > n - i:
            break
        if out and size > budget:  # read alone: not decoded while the consumer is on an earlier one
            break
        try:
            ev = event_at(decoder, state, fde, csize, verify, s + i, size, offset)
        except Exception as e:
            return out, offset, e
        if ev is None:
            break
        out.append(ev)
        i += size
        offset += size
        budget -= size
        if budget <= 0 or code == XID or (code == QUERY and (<object>ev).body.query != "BEGIN"):
            break
    return out, offset, None


def hop(bytes buf, Py_ssize_t i, Py_ssize_t limit, bytes codes, Py_ssize_t hlen, unsigned long long max_payload,
        Py_ssize_t crc=0, Py_ssize_t query_post=13, set maps=None):
    """Past the events at ``buf[i]`` a pass does not read, up to ``limit`` (where the next event
    starts), without an object each: ``codes[type]`` 1 marks a skipped type; 2 the QUERY type, hopped
    when its statement is exactly ``BEGIN``; 3 the TABLE_MAP type, hopped when its body (after the
    header, before the ``crc`` checksum bytes) is in ``maps`` (``reader.KnownEvents`` is the
    reference). Stops at any other event, one the buffer does not hold whole (or its header), or a
    length the reader has something to say about (its own path then reads it)."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef const unsigned char *table = <const unsigned char *>PyBytes_AS_STRING(codes)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), q, end, status
    cdef unsigned long long size
    cdef unsigned char kind
    if PyBytes_GET_SIZE(codes) != 256:
        raise ValueError("codes: one byte per type code")
    while i >= 0 and i < limit and n - i >= hlen:
        kind = table[s[i + 4]]
        if not kind:
            break
        size = le(s + i + 9, 4)
        if size < <unsigned long long>hlen or size > max_payload or size > <unsigned long long>(n - i):
            break
        end = i + <Py_ssize_t>size - crc
        if kind == 2:  # BEGIN? (status vars, then the database and its NUL, then the statement)
            q = i + hlen + query_post
            if query_post < 13 or q > end:
                break
            status = <Py_ssize_t>le(s + i + hlen + 11, 2)
            q += status + s[i + hlen + 8] + 1
            if end - q != 5 or memcmp(s + q, b"BEGIN", 5) != 0:
                break
        elif kind == 3:
            if maps is None or end < i + hlen:
                break
            if PyBytes_FromStringAndSize(<const char *>s + i + hlen, end - i - hlen) not in maps:
                break
        i += <Py_ssize_t>size
    return i


def walk(bytes buf, Py_ssize_t base, Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t hlen):
    """Walk event headers by their lengths alone from file offset ``pos`` (an event start) while
    ``pos < limit``; ``buf`` holds the file's bytes from offset ``base``. Returns (the last event
    start walked from, where the walk stopped, why): 0 it reached ``limit``; 1 the next header is
    not in ``buf`` (read on from there, or the file ends); 2 a length shorter than a header."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), before = pos
    cdef unsigned long long size
    while pos < limit:
        if pos - base < 0 or n - (pos - base) < hlen:
            return before, pos, 1
        size = le(s + (pos - base) + 9, 4)
        if size < <unsigned long long>hlen:
            return before, pos, 2
        before = pos
        pos += <Py_ssize_t>size
    return before, pos, 0


# the verbs of a canonical XA statement, after ``XA `` and before its blank, and their kinds
cdef tuple XA_VERBS = (b"START", b"BEGIN", b"END", b"PREPARE", b"COMMIT", b"ROLLBACK")
cdef tuple XA_KINDS = (Kind.XA_START, Kind.XA_START, Kind.XA_END, Kind.XA_PREPARE, Kind.XA_COMMIT, Kind.XA_ROLLBACK)
XA_KIND_VALUES = tuple(k.value for k in XA_KINDS)  # ``XaParts.verb`` -> its ``Kind``'s value
cdef object XA_END_KIND = Kind.XA_END


cdef inline int hex_digit(unsigned char c) noexcept:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef Py_ssize_t hex_end(const unsigned char *s, Py_ssize_t p, Py_ssize_t end) noexcept:
    """After ``X'<pairs of hex digits>'`` starting at ``p``: where it ends, or -1."""
    if end - p < 3 or s[p] != 88 or s[p + 1] != 39:  # X'
        return -1
    p += 2
    while p < end and s[p] != 39:
        if hex_digit(s[p]) < 0:
            return -1
        p += 1
    if p >= end:
        return -1
    return p + 1


cdef bytes unhex(const unsigned char *s, Py_ssize_t p, Py_ssize_t q):
    """The bytes of the hex digits ``s[p:q]`` (checked: pairs of hex digits)."""
    out = PyBytes_FromStringAndSize(NULL, (q - p) // 2)
    cdef unsigned char *o = <unsigned char *>PyBytes_AS_STRING(out)
    cdef Py_ssize_t k = 0
    while p < q:
        o[k] = <unsigned char>(hex_digit(s[p]) << 4 | hex_digit(s[p + 1]))
        p += 2
        k += 1
    return out


cdef bint xa_parse(const unsigned char *s, Py_ssize_t start, Py_ssize_t end, XaParts *out) noexcept:
    """Whether the text ``s[start:end]`` is a canonical XA statement in ASCII (``statements.xa_canonical``),
    its parts in ``out``."""
    cdef Py_ssize_t p = start, n, k
    cdef const unsigned char *verb
    cdef unsigned long long fmt = 0
    if end - start < 4 or s[p] != 88 or s[p + 1] != 65 or s[p + 2] != 32:
        return False  # not ``XA ``
    p += 3
    out.verb = -1
    for k in range(6):
        verb = <const unsigned char *>PyBytes_AS_STRING(<bytes>XA_VERBS[k])
        n = PyBytes_GET_SIZE(<bytes>XA_VERBS[k])
        if end - p > n and s[p + n] == 32 and memcmp(s + p, verb, n) == 0:
            out.verb = k
            p += n + 1
            break
    if out.verb < 0:
        return False
    out.g0 = p + 2
    p = hex_end(s, p, end)
    if p < 0 or p >= end or s[p] != 44:  # ,
        return False
    out.g1 = p - 1
    out.b0 = p + 3
    p = hex_end(s, p + 1, end)
    if p < 0 or p >= end or s[p] != 44:
        return False
    out.b1 = p - 1
    if (out.g1 - out.g0) % 2 or (out.b1 - out.b0) % 2:
        return False
    p += 1
    k = p
    while p < end and 48 <= s[p] <= 57:
        fmt = fmt * 10 + (s[p] - 48)
        p += 1
    if p == k or p - k > 10 or (s[k] == 48 and p - k > 1):
        return False
    out.fmt = fmt
    out.one_phase = False
    if p < end:
        if end - p != 10 or memcmp(s + p, b" ONE PHASE", 10) != 0:
            return False
        out.one_phase = True
    return True


cdef object xa_parts_id(const unsigned char *s, XaParts *x):
    """The ``XaId`` of a parsed statement (left out of the cycle collector: numbers and bytes)."""
    return XA_ID.make((PyLong_FromUnsignedLongLong(x.fmt), unhex(s, x.g0, x.g1), unhex(s, x.b0, x.b1)))


def xa_statement(bytes buf, Py_ssize_t start, Py_ssize_t end, bint end_id=True):
    """``statements.xa_canonical`` of the statement text ``buf[start:end]``: (kind, XaId, one
    phase), or None when it is not a canonical XA statement in ASCII (the reference reads it then).
    ``end_id`` false: an ``XA END``'s id is not made (None; its transaction does not read it)."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef XaParts x
    if start < 0 or end > PyBytes_GET_SIZE(buf) or not xa_parse(s, start, end, &x):
        return None
    kind = XA_KINDS[x.verb]
    if not end_id and kind is XA_END_KIND:
        return kind, None, x.one_phase
    return kind, xa_parts_id(s, &x), x.one_phase


cdef object make_xa_id(object format_id, bytes gtrid, bytes bqual):
    """``XaId(format_id, gtrid, bqual)``, left out of the cycle collector as CPython leaves out
    tuples of numbers and bytes (the merge holds one per prepared branch)."""
    return XA_ID.make((format_id, gtrid, bqual))


def xa_id(format_id, bytes gtrid, bytes bqual):
    """``make_xa_id`` from Python."""
    return make_xa_id(format_id, gtrid, bqual)
