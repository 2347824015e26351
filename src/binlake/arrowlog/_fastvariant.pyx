# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The change log's record batches in C: row images as VARIANT objects, one call per image, and
every other field, written straight into Arrow buffers (``binlake.arrowlog.changelog``).

The pure ``binlake.arrowlog.variant.ObjectEncoder`` is the reference. An ``ObjectPlan`` is made from
one (its field order, ids, metadata and skip marker) plus, per field, a kind from
``binlake.arrowlog.images.column_encoding``: the common value types (integers by declared width,
decimals, floats, dates and timestamps, TIME, text, binary, ENUM/SET names, JSON documents — a plain
one's text written here too) are written here; anything else — a value of a type the kind does not
expect, out of its range, a kind ``PY`` — goes to the field's pure encoder, so bytes and errors are
the reference's by construction. ``VariantColumn`` fills one VARIANT column (values, metadata,
validity); ``BatchBuilder`` fills a whole batch change by change (``changelog._batch`` is its
reference), without a Python object per row, and gives up on a change it does not take
(``Misfit``), which the caller then builds the pure way.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_CheckExact, PyByteArray_GET_SIZE
from cpython.datetime cimport (
    PyDate_CheckExact, PyDateTime_CheckExact, PyDelta_CheckExact, datetime_tzinfo, import_datetime,
    timedelta_days, timedelta_microseconds, timedelta_seconds,
)
from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_CheckExact
from cpython.long cimport PyLong_Check, PyLong_AsLongLong, PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLong, PyLong_CheckExact
from cpython.object cimport PyObject
from cpython.sequence cimport PySequence_GetItem
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_CheckExact, PyUnicode_Join
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.math cimport fabs, isfinite
from libc.stdio cimport snprintf
from libc.string cimport memcpy, memset, strlen, strstr
from cpython.dict cimport PyDict_CheckExact
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM, PyList_GET_SIZE

import datetime as _dt
from decimal import Decimal as _Decimal

import pyarrow as pa

cdef extern from "Python.h":
    char *PyOS_double_to_string(double val, char format_code, int precision, int flags, int *ptype) except NULL
    int Py_DTSF_ADD_DOT_0
    void PyMem_Free(void *p)
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except? NULL
    int PyFloat_Pack4(double x, char *p, int le) except? -1
    int PyFloat_Pack8(double x, char *p, int le) except? -1
    int PyDateTime_GET_YEAR(object o)
    int PyDateTime_GET_MONTH(object o)
    int PyDateTime_GET_DAY(object o)
    int PyDateTime_DATE_GET_HOUR(object o)
    int PyDateTime_DATE_GET_MINUTE(object o)
    int PyDateTime_DATE_GET_SECOND(object o)
    int PyDateTime_DATE_GET_MICROSECOND(object o)
    void PyErr_Clear()

cdef extern from *:
    """
    typedef __int128 i128;
    """
    ctypedef long long i128

import_datetime()

# the module's interface this source expects (``binlake.arrowlog.images``): a stale build is not used
INTERFACE = 3

# field kinds (``binlake.arrowlog.images.column_encoding`` names them)
cdef enum:
    K_PY = 0
    K_INT8 = 1
    K_INT16 = 2
    K_INT32 = 3
    K_INT64 = 4
    K_UINT64 = 5
    K_DEC4 = 6
    K_DEC8 = 7
    K_DEC16 = 8
    K_FLOAT = 9
    K_DOUBLE = 10
    K_DATE = 11
    K_TS_NTZ = 12
    K_TS = 13
    K_TIME = 14
    K_TEXT = 15
    K_BYTES = 16
    K_ENUM = 17
    K_SET = 18
    K_JSON = 19
    # variant primitive headers (type id << 2)
    H_NULL = 0
    H_INT8 = 3 << 2
    H_INT16 = 4 << 2
    H_INT32 = 5 << 2
    H_INT64 = 6 << 2
    H_DOUBLE = 7 << 2
    H_DEC4 = 8 << 2
    H_DEC8 = 9 << 2
    H_DEC16 = 10 << 2
    H_DATE = 11 << 2
    H_TS = 12 << 2
    H_TS_NTZ = 13 << 2
    H_FLOAT = 14 << 2
    H_BINARY = 15 << 2
    H_STRING = 16 << 2
    OBJECT = 2

KINDS = {
    "PY": K_PY, "INT8": K_INT8, "INT16": K_INT16, "INT32": K_INT32, "INT64": K_INT64,
    "UINT64": K_UINT64, "DEC4": K_DEC4, "DEC8": K_DEC8, "DEC16": K_DEC16, "FLOAT": K_FLOAT,
    "DOUBLE": K_DOUBLE, "DATE": K_DATE, "TS_NTZ": K_TS_NTZ, "TS": K_TS, "TIME": K_TIME,
    "TEXT": K_TEXT, "BYTES": K_BYTES, "ENUM": K_ENUM, "SET": K_SET, "JSON": K_JSON,
}

cdef object _UTC = _dt.timezone.utc
cdef object _DECIMAL = _Decimal
cdef object _COMMA = ","
cdef long long EPOCH_DAY = 719163  # date(1970, 1, 1).toordinal()
cdef int _DAYS_BEFORE_MONTH[13]
_DAYS_BEFORE_MONTH[:] = [0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334]


cdef struct Buf:
    char *data
    Py_ssize_t size
    Py_ssize_t cap


cdef int buf_reserve(Buf *b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need = b.size + extra
    cdef Py_ssize_t cap
    cdef char *p
    if need <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 256
    while cap < need:
        cap *= 2
    p = <char *>realloc(b.data, cap)
    if p == NULL:
        raise MemoryError()
    b.data = p
    b.cap = cap
    return 0


cdef inline int buf_put(Buf *b, const char *s, Py_ssize_t n) except -1:
    buf_reserve(b, n)
    memcpy(b.data + b.size, s, n)
    b.size += n
    return 0


cdef inline int put_le(Buf *b, uint8_t header, uint64_t v, int width) except -1:
    """A header byte and ``width`` little-endian bytes of ``v``."""
    cdef int i
    buf_reserve(b, 1 + width)
    b.data[b.size] = <char>header
    for i in range(width):
        b.data[b.size + 1 + i] = <char>(v & 0xFF)
        v >>= 8
    b.size += 1 + width
    return 0


cdef inline int put_string(Buf *b, const char *s, Py_ssize_t n) except -1:
    if n < 64:
        buf_reserve(b, 1 + n)
        b.data[b.size] = <char>((n << 2) | 1)
        b.size += 1
    else:
        put_le(b, H_STRING, <uint64_t>n, 4)
    return buf_put(b, s, n)


cdef inline int put_binary(Buf *b, const char *s, Py_ssize_t n) except -1:
    put_le(b, H_BINARY, <uint64_t>n, 4)
    return buf_put(b, s, n)


cdef inline int put_str(Buf *b, object s) except -1:
    """A str as a variant string; 1 when it is not UTF-8 encodable (surrogates: the reference's)."""
    cdef Py_ssize_t n
    cdef const char *p
    try:
        p = PyUnicode_AsUTF8AndSize(s, &n)
    except UnicodeError:
        return 1
    put_string(b, p, n)
    return 0


cdef inline long long ordinal(int y, int m, int d) noexcept:
    """``date(y, m, d).toordinal()``."""
    cdef long long yy = y - 1
    cdef long long days = yy * 365 + yy // 4 - yy // 100 + yy // 400 + _DAYS_BEFORE_MONTH[m] + d
    if m > 2 and (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)):
        days += 1
    return days


cdef inline int64_t epoch_us(object v) noexcept:
    """Microseconds from 1970-01-01 00:00 to a datetime's fields (its zone not applied)."""
    cdef int64_t days = ordinal(PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v)) - EPOCH_DAY
    return (
        ((days * 24 + PyDateTime_DATE_GET_HOUR(v)) * 60 + PyDateTime_DATE_GET_MINUTE(v)) * 60
        + PyDateTime_DATE_GET_SECOND(v)
    ) * 1000000 + PyDateTime_DATE_GET_MICROSECOND(v)


cdef int put_decimal(Buf *b, object v, int kind, int scale) except -1:
    """A Decimal whose exponent is the column's scale, from its text; 1 for anything else
    (another exponent, exponent notation, NaN, too many digits, out of the width's range)."""
    cdef object text = str(v)
    cdef Py_ssize_t n, i
    cdef const char *s = PyUnicode_AsUTF8AndSize(text, &n)
    cdef int neg = 0, digits = 0, frac = -1
    cdef i128 u = 0
    cdef char c
    cdef uint64_t lo
    i = 0
    if n and s[0] == c'-':
        neg = 1
        i = 1
    if i == n:
        return 1
    while i < n:
        c = s[i]
        if c == c'.':
            if frac >= 0:
                return 1
            frac = 0
        elif c'0' <= c <= c'9':
            if digits == 38:
                return 1
            u = u * 10 + (c - c'0')
            if u != 0:
                digits += 1
            if frac >= 0:
                frac += 1
        else:
            return 1
        i += 1
    if (frac if frac >= 0 else 0) != scale:
        return 1
    if neg:
        u = -u
    if kind == K_DEC4:
        if u < -2147483648 or u > 2147483647:
            return 1
        buf_reserve(b, 1)
        b.data[b.size] = <char>H_DEC4
        b.size += 1
        put_le(b, <uint8_t>scale, <uint64_t><int64_t>u, 4)
    elif kind == K_DEC8:
        if u < -9223372036854775807 - 1 or u > 9223372036854775807:
            return 1
        buf_reserve(b, 2)
        b.data[b.size] = <char>H_DEC8
        b.size += 1
        put_le(b, <uint8_t>scale, <uint64_t><int64_t>u, 8)
    else:
        buf_reserve(b, 2)
        b.data[b.size] = <char>H_DEC16
        b.size += 1
        lo = <uint64_t>u
        put_le(b, <uint8_t>scale, lo, 8)
        put_le_tail(b, <uint64_t>(u >> 64))
    return 0


cdef inline int put_le_tail(Buf *b, uint64_t v) except -1:
    cdef int i
    buf_reserve(b, 8)
    for i in range(8):
        b.data[b.size + i] = <char>(v & 0xFF)
        v >>= 8
    b.size += 8
    return 0


cdef int put_uint64_decimal(Buf *b, object v) except -1:
    """An integer of 2**63 .. 2**64 - 1 as a decimal16 of scale 0; 1 beyond."""
    cdef uint64_t u
    try:
        u = PyLong_AsUnsignedLongLong(v)
    except OverflowError:
        return 1
    put_le(b, H_DEC16, 0, 1)  # the header, then scale 0
    put_le_tail(b, u)
    return put_le_tail(b, 0)


cdef int put_time(Buf *b, object td, int fsp) except -1:
    """``format_time(td, fsp)`` as a variant string."""
    cdef int64_t us = (<int64_t>timedelta_days(td) * 86400 + timedelta_seconds(td)) * 1000000 + timedelta_microseconds(td)
    cdef char out[48]
    cdef int n = 0, k
    cdef int64_t s, frac, h, m
    cdef char digits[24]
    cdef int nd
    if us < 0:
        out[n] = c'-'
        n += 1
        us = -us
    s = us // 1000000
    frac = us % 1000000
    h = s // 3600
    m = (s % 3600) // 60
    s = s % 60
    nd = 0
    while True:
        digits[nd] = <char>(c'0' + h % 10)
        nd += 1
        h //= 10
        if h == 0:
            break
    if nd < 2:
        digits[nd] = c'0'
        nd += 1
    while nd:
        nd -= 1
        out[n] = digits[nd]
        n += 1
    out[n] = c':'
    out[n + 1] = <char>(c'0' + m // 10)
    out[n + 2] = <char>(c'0' + m % 10)
    out[n + 3] = c':'
    out[n + 4] = <char>(c'0' + s // 10)
    out[n + 5] = <char>(c'0' + s % 10)
    n += 6
    if fsp:
        out[n] = c'.'
        n += 1
        for k in range(6):
            digits[5 - k] = <char>(c'0' + frac % 10)
            frac //= 10
        for k in range(fsp if fsp < 6 else 6):
            out[n] = digits[k]
            n += 1
    return put_string(b, out, n)


cdef int put_value(Buf *b, object v, int kind, int arg) except -1:
    """One non-NULL value of a field's kind; 1 where the field's pure encoder must take it."""
    cdef long long x
    cdef int overflow
    cdef Py_ssize_t n
    cdef double d
    cdef object tz
    if kind == K_PY:
        return 1
    if kind <= K_UINT64:
        if not PyLong_CheckExact(v):
            return 1
        x = PyLong_AsLongLongAndOverflow(v, &overflow)
        if overflow:
            if kind == K_UINT64 and overflow > 0:  # 2**63 <= v: ``enc_uint64``'s decimal(20, 0)
                return put_uint64_decimal(b, v)
            return 1
        if kind == K_INT8:
            if x < -128 or x > 127:
                return 1
            return put_le(b, H_INT8, <uint64_t>x, 1)
        if kind == K_INT16:
            if x < -32768 or x > 32767:
                return 1
            return put_le(b, H_INT16, <uint64_t>x, 2)
        if kind == K_INT32:
            if x < -2147483648 or x > 2147483647:
                return 1
            return put_le(b, H_INT32, <uint64_t>x, 4)
        return put_le(b, H_INT64, <uint64_t>x, 8)
    if kind <= K_DEC16:
        if type(v) is not _DECIMAL:
            return 1
        return put_decimal(b, v, kind, arg)
    if kind == K_FLOAT or kind == K_DOUBLE:
        if not PyFloat_CheckExact(v):
            return 1
        d = PyFloat_AS_DOUBLE(v)
        buf_reserve(b, 9)
        if kind == K_FLOAT:
            try:
                PyFloat_Pack4(d, b.data + b.size + 1, 1)
            except OverflowError:
                return 1
            b.data[b.size] = <char>H_FLOAT
            b.size += 5
        else:
            PyFloat_Pack8(d, b.data + b.size + 1, 1)
            b.data[b.size] = <char>H_DOUBLE
            b.size += 9
        return 0
    if kind == K_DATE:
        if not PyDate_CheckExact(v):
            return 1
        x = ordinal(PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v)) - EPOCH_DAY
        return put_le(b, H_DATE, <uint64_t>x, 4)
    if kind == K_TS_NTZ or kind == K_TS:
        if not PyDateTime_CheckExact(v):
            return 1
        tz = datetime_tzinfo(v)
        if kind == K_TS_NTZ:
            if tz is not None:
                return 1
            return put_le(b, H_TS_NTZ, <uint64_t>epoch_us(v), 8)
        if tz is not None and tz is not _UTC:
            return 1
        return put_le(b, H_TS, <uint64_t>epoch_us(v), 8)
    if kind == K_TIME:
        if not PyDelta_CheckExact(v) or not -1000000 < timedelta_days(v) < 1000000:
            return 1  # (days beyond those would overflow the microseconds; TIME holds 35)
        return put_time(b, v, arg)
    if kind == K_TEXT or kind == K_ENUM:
        if PyUnicode_CheckExact(v):
            return put_str(b, v)
        if kind == K_TEXT and PyBytes_CheckExact(v):
            return put_binary(b, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v))
        return 1
    if kind == K_BYTES:
        if PyBytes_CheckExact(v):
            return put_binary(b, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v))
        if PyByteArray_CheckExact(v):
            return put_binary(b, PyByteArray_AS_STRING(v), PyByteArray_GET_SIZE(v))
        return 1
    if kind == K_SET:
        if not PyTuple_CheckExact(v):
            return 1
        return put_str(b, PyUnicode_Join(_COMMA, v))
    if kind == K_JSON:
        if type(v) is not _JSON:
            return 1
        if v.plain:  # ``Json.text()`` of a plain document, written here
            _text.size = 0
            if json_text(&_text, v.value, 0) == 0:
                return put_string(b, _text.data, _text.size)
        return put_str(b, v.text())
    return 1


cdef Buf _text  # a JSON document's text being written (one at a time)
cdef const char *_HEX = "0123456789abcdef"


cdef int json_string(Buf *b, object s) except -1:
    """A str as ``json.encoder.encode_basestring`` quotes it; 1 when it is not UTF-8 encodable."""
    cdef Py_ssize_t n, i, start = 0
    cdef const unsigned char *p
    cdef unsigned char c
    cdef char esc[6]
    try:
        p = <const unsigned char *>PyUnicode_AsUTF8AndSize(s, &n)
    except UnicodeError:
        return 1
    buf_put(b, "\"", 1)
    for i in range(n):
        c = p[i]
        if c >= 0x20 and c != 34 and c != 92:
            continue
        buf_put(b, <const char *>p + start, i - start)
        start = i + 1
        if c == 34:
            buf_put(b, "\\\"", 2)
        elif c == 92:
            buf_put(b, "\\\\", 2)
        elif c == 10:
            buf_put(b, "\\n", 2)
        elif c == 13:
            buf_put(b, "\\r", 2)
        elif c == 9:
            buf_put(b, "\\t", 2)
        elif c == 8:
            buf_put(b, "\\b", 2)
        elif c == 12:
            buf_put(b, "\\f", 2)
        else:
            esc[0], esc[1], esc[2], esc[3] = c'\\', c'u', c'0', c'0'
            esc[4], esc[5] = _HEX[c >> 4], _HEX[c & 15]
            buf_put(b, esc, 6)
    buf_put(b, <const char *>p + start, n - start)
    buf_put(b, "\"", 1)
    return 0


cdef int json_text(Buf *b, object v, int depth) except -1:
    """A plain JSON value as ``json.dumps(v, ensure_ascii=False)`` writes it (``Json.text``); 1
    for anything else (a float MySQL writes otherwise, a key that is not text, deep nesting)."""
    cdef long long x
    cdef int overflow
    cdef double f
    cdef char *r
    cdef Py_ssize_t i, n
    cdef bint first
    cdef object key, item
    if depth > 200:
        return 1
    if v is None:
        return buf_put(b, "null", 4)
    if v is True:
        return buf_put(b, "true", 4)
    if v is False:
        return buf_put(b, "false", 5)
    if PyUnicode_CheckExact(v):
        return json_string(b, v)
    if PyLong_Check(v):  # JsonUInt too: json writes any int by int.__repr__
        x = PyLong_AsLongLongAndOverflow(v, &overflow)
        if overflow:
            return 1
        buf_reserve(b, 24)
        b.size += snprintf(b.data + b.size, 24, "%lld", x)
        return 0
    if PyFloat_CheckExact(v):
        f = fabs(PyFloat_AS_DOUBLE(v))
        if not isfinite(f) or 1e-15 <= f < 1e-4 or 1e15 <= f < 1e16:
            return 1  # MySQL writes these otherwise than repr: ``double_text``'s
        r = PyOS_double_to_string(PyFloat_AS_DOUBLE(v), c'r', 0, Py_DTSF_ADD_DOT_0, NULL)
        try:
            if strstr(r, "e+") != NULL:
                return 1  # MySQL writes 1e20: ``double_text``'s
            buf_put(b, r, strlen(r))
        finally:
            PyMem_Free(r)
        return 0
    if PyDict_CheckExact(v):
        buf_put(b, "{", 1)
        first = True
        for key, item in (<dict>v).items():
            if not PyUnicode_CheckExact(key):
                return 1
            if not first:
                buf_put(b, ", ", 2)
            first = False
            if json_string(b, key) or (buf_put(b, ": ", 2) or json_text(b, item, depth + 1)):
                return 1
        return buf_put(b, "}", 1)
    if PyList_CheckExact(v):
        buf_put(b, "[", 1)
        n = len(<list>v)
        for i in range(n):
            if i:
                buf_put(b, ", ", 2)
            if json_text(b, (<list>v)[i], depth + 1):
                return 1
        return buf_put(b, "]", 1)
    return 1


cdef object _JSON = None


def set_json_type(t):
    """The JSON column value's class (``binlake.values.json_binary.Json``; not imported here)."""
    global _JSON
    _JSON = t


cdef inline int width(uint64_t n) noexcept:
    return 1 if n < (1 << 8) else 2 if n < (1 << 16) else 3 if n < (1 << 24) else 4


cdef class ObjectPlan:
    """One ``ObjectEncoder``'s fields (in key order) as data: row index, key id, kind, argument and
    the pure encoder. ``plan(row)`` gives the same bytes as ``encoder(row)``."""

    cdef readonly bytes metadata
    cdef int n
    cdef Py_ssize_t *index
    cdef int *ids
    cdef int *kinds
    cdef int *args
    cdef list fallbacks
    cdef object skip
    cdef int max_id
    cdef Buf scratch  # the values of one object
    cdef Py_ssize_t *offsets  # n + 1
    cdef int *present  # the fields of a partial image

    def __cinit__(self):
        self.index = NULL
        self.ids = NULL
        self.kinds = NULL
        self.args = NULL
        self.offsets = NULL
        self.present = NULL
        self.scratch.data = NULL
        self.scratch.size = 0
        self.scratch.cap = 0

    def __init__(self, encoder, kinds):
        """``encoder``: a ``variant.ObjectEncoder``; ``kinds``: (kind, argument) per field, in the
        order of the encoder's names."""
        cdef int i, k
        plan = encoder._plan
        ids = encoder._ids
        self.n = len(plan)
        if len(ids) != self.n or len(kinds) != self.n or any(not 0 <= idx < self.n for idx, _ in plan):
            raise ValueError("an object plan needs one id and one kind per field")
        self.metadata = encoder.metadata
        self.skip = encoder._skip
        k = self.n if self.n else 1
        self.index = <Py_ssize_t *>malloc(k * sizeof(Py_ssize_t))
        self.ids = <int *>malloc(k * sizeof(int))
        self.kinds = <int *>malloc(k * sizeof(int))
        self.args = <int *>malloc(k * sizeof(int))
        self.present = <int *>malloc(k * sizeof(int))
        self.offsets = <Py_ssize_t *>malloc((k + 1) * sizeof(Py_ssize_t))
        if not (self.index and self.ids and self.kinds and self.args and self.present and self.offsets):
            raise MemoryError()
        self.fallbacks = []
        self.max_id = 0
        for i in range(self.n):
            idx, enc = plan[i]
            self.index[i] = idx
            self.ids[i] = ids[i]
            self.max_id = max(self.max_id, ids[i])
            kind, arg = kinds[idx]
            self.kinds[i] = kind
            self.args[i] = arg
            self.fallbacks.append(enc)

    def __dealloc__(self):
        free(self.index)
        free(self.ids)
        free(self.kinds)
        free(self.args)
        free(self.present)
        free(self.offsets)
        free(self.scratch.data)

    def __call__(self, row):
        cdef Buf out
        out.data = NULL
        out.size = 0
        out.cap = 0
        try:
            self.write(&out, row)
            return PyBytes_FromStringAndSize(out.data, out.size)
        finally:
            free(out.data)

    cdef int write(self, Buf *out, object row, const Py_ssize_t *remap=NULL) except -1:
        """Append the object of ``row`` to ``out`` (``remap``: field ``k`` of the row is ``row[remap[k]]``:
        a key written from its image)."""
        cdef Buf *s = &self.scratch
        cdef Py_ssize_t k
        cdef int i, m = 0, partial = 0, isize, osize, large, j, maxid = 0
        cdef Py_ssize_t total, start
        cdef object v, bv
        cdef PyObject *p
        cdef bint tup = PyTuple_CheckExact(row)
        cdef bint lst = not tup and PyList_CheckExact(row)
        cdef object skip = self.skip
        cdef char *h
        s.size = 0
        for i in range(self.n):
            k = self.index[i] if remap == NULL else remap[self.index[i]]
            if tup and 0 <= k < PyTuple_GET_SIZE(row):
                p = PyTuple_GET_ITEM(row, k)
                v = <object>p
            elif lst and 0 <= k < PyList_GET_SIZE(row):  # a decoded image, as the decoder gives it
                p = PyList_GET_ITEM(row, k)
                v = <object>p
            else:  # checked (the module's indexing is not): the reference's IndexError
                v = PySequence_GetItem(row, k)
            if skip is not None and v is skip:
                partial = 1
                continue
            self.offsets[m] = s.size
            self.present[m] = self.ids[i]
            if self.ids[i] > maxid:
                maxid = self.ids[i]
            m += 1
            if v is None:
                buf_reserve(s, 1)
                s.data[s.size] = <char>H_NULL
                s.size += 1
            elif put_value(s, v, self.kinds[i], self.args[i]):
                bv = self.fallbacks[i](v)
                if not PyBytes_CheckExact(bv):
                    bv = bytes(bv)
                buf_put(s, PyBytes_AS_STRING(bv), PyBytes_GET_SIZE(bv))
        total = s.size
        self.offsets[m] = total
        if partial:  # ``variant.object_value``: offsets of the width the total needs
            isize = width(maxid)
            osize = width(total)
            large = m > 255
        else:  # ``ObjectEncoder.__call__``: ids of the width of every id, offsets 1, 2 or 4 bytes
            isize = width(self.max_id)
            osize = 1 if total < (1 << 8) else 2 if total < (1 << 16) else 4
            large = self.n > 255
        buf_reserve(out, 1 + (4 if large else 1) + m * isize + (m + 1) * osize + total)
        h = out.data + out.size
        h[0] = <char>(((((large << 4) | ((isize - 1) << 2) | (osize - 1)) << 2) | OBJECT))
        h += 1
        for j in range(4 if large else 1):
            h[j] = <char>((m >> (8 * j)) & 0xFF)
        h += 4 if large else 1
        for i in range(m):
            for j in range(isize):
                h[j] = <char>((self.present[i] >> (8 * j)) & 0xFF)
            h += isize
        for i in range(m + 1):
            for j in range(osize):
                h[j] = <char>((self.offsets[i] >> (8 * j)) & 0xFF)
            h += osize
        memcpy(h, s.data, total)
        h += total
        out.size = h - out.data
        return 0


cdef class VariantColumn:
    """One VARIANT column of a batch being filled: value and metadata bytes end to end, their
    offsets, and which rows are NULL (such a row holds empty values, as the pure builder's)."""

    cdef Buf values
    cdef Buf metas
    cdef Buf voffsets  # int32 per row + 1
    cdef Buf moffsets
    cdef Buf valid  # one byte per row
    cdef Py_ssize_t rows
    cdef Py_ssize_t nulls
    cdef Py_ssize_t saved[7]

    cdef void save(self) noexcept:
        """Remember the column's end (``restore`` takes a half-added change back)."""
        self.saved[0], self.saved[1], self.saved[2] = self.values.size, self.metas.size, self.voffsets.size
        self.saved[3], self.saved[4], self.saved[5] = self.moffsets.size, self.valid.size, self.rows
        self.saved[6] = self.nulls

    cdef void restore(self) noexcept:
        self.values.size, self.metas.size, self.voffsets.size = self.saved[0], self.saved[1], self.saved[2]
        self.moffsets.size, self.valid.size, self.rows = self.saved[3], self.saved[4], self.saved[5]
        self.nulls = self.saved[6]

    def __cinit__(self):
        memset(&self.values, 0, sizeof(Buf))
        memset(&self.metas, 0, sizeof(Buf))
        memset(&self.voffsets, 0, sizeof(Buf))
        memset(&self.moffsets, 0, sizeof(Buf))
        memset(&self.valid, 0, sizeof(Buf))
        self.rows = 0
        self.nulls = 0
        self._offset(&self.voffsets, 0)
        self._offset(&self.moffsets, 0)

    def __dealloc__(self):
        free(self.values.data)
        free(self.metas.data)
        free(self.voffsets.data)
        free(self.moffsets.data)
        free(self.valid.data)

    cdef int _offset(self, Buf *b, Py_ssize_t at) except -1:
        cdef int32_t o
        if at > 2147483647:
            raise OverflowError("a change-log batch's VARIANT column is over 2 GiB")
        o = <int32_t>at
        return buf_put(b, <char *>&o, 4)

    cdef int _end(self, bint valid) except -1:
        cdef char c = 1 if valid else 0
        self._offset(&self.voffsets, self.values.size)
        self._offset(&self.moffsets, self.metas.size)
        buf_put(&self.valid, &c, 1)
        self.rows += 1
        if not valid:
            self.nulls += 1
        return 0

    def add(self, ObjectPlan plan, row):
        """The image or key ``row`` by ``plan``; None: a NULL variant."""
        self.put(plan, row)

    cdef int put(self, ObjectPlan plan, object row, const Py_ssize_t *remap=NULL) except -1:
        if row is None:
            return self._end(False)
        plan.write(&self.values, row, remap)
        buf_put(&self.metas, PyBytes_AS_STRING(plan.metadata), PyBytes_GET_SIZE(plan.metadata))
        return self._end(True)

    def add_bytes(self, bytes value, bytes metadata):
        """A variant already encoded (a rename's names)."""
        buf_put(&self.values, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
        buf_put(&self.metas, PyBytes_AS_STRING(metadata), PyBytes_GET_SIZE(metadata))
        self._end(True)

    def add_null(self):
        self._end(False)

    def array(self, type):
        """The column as an Arrow struct array of ``type`` (``changelog.VARIANT``)."""
        cdef Py_ssize_t i
        cdef bytes bitmap
        cdef char *bm
        values = pa.Array.from_buffers(
            pa.binary(), self.rows, [None, _buffer(&self.voffsets), _buffer(&self.values)]
        )
        metas = pa.Array.from_buffers(
            pa.binary(), self.rows, [None, _buffer(&self.moffsets), _buffer(&self.metas)]
        )
        validity = None
        if self.nulls:
            bitmap = PyBytes_FromStringAndSize(NULL, (self.rows + 7) // 8)
            bm = PyBytes_AS_STRING(bitmap)
            memset(bm, 0, (self.rows + 7) // 8)
            for i in range(self.rows):
                if self.valid.data[i]:
                    bm[i >> 3] |= <char>(1 << (i & 7))
            validity = pa.py_buffer(bitmap)
        return pa.Array.from_buffers(type, self.rows, [validity], null_count=self.nulls, children=[values, metas])


cdef object _buffer(Buf *b):
    return pa.py_buffer(PyBytes_FromStringAndSize(b.data, b.size))


# ---- a whole change-log batch (``binlake.arrowlog.changelog._batch`` is the reference) ----

class Misfit(Exception):
    """A change this builder does not take as it is (a value of an unexpected type or range): the
    caller builds that batch the pure way, which gives its result or raises its error."""


cdef object _bitmap(Buf *valid, Py_ssize_t rows):
    cdef bytes bitmap = PyBytes_FromStringAndSize(NULL, (rows + 7) // 8)
    cdef char *bm = PyBytes_AS_STRING(bitmap)
    cdef Py_ssize_t i
    memset(bm, 0, (rows + 7) // 8)
    for i in range(rows):
        if valid.data[i]:
            bm[i >> 3] |= <char>(1 << (i & 7))
    return pa.py_buffer(bitmap)


cdef class _Int64s:
    cdef Buf data
    cdef Buf valid
    cdef Py_ssize_t rows, nulls
    cdef Py_ssize_t saved[4]

    cdef void save(self) noexcept:
        self.saved[0], self.saved[1], self.saved[2], self.saved[3] = self.data.size, self.valid.size, self.rows, self.nulls

    cdef void restore(self) noexcept:
        self.data.size, self.valid.size, self.rows, self.nulls = self.saved[0], self.saved[1], self.saved[2], self.saved[3]

    def __dealloc__(self):
        free(self.data.data)
        free(self.valid.data)

    cdef int add(self, object v) except -1:
        cdef int64_t x = 0
        cdef char ok = 1
        if v is None:
            ok = 0
            self.nulls += 1
        elif PyLong_CheckExact(v):
            try:
                x = PyLong_AsLongLong(v)
            except OverflowError:  # the pure path's error instead
                raise Misfit()
        else:
            raise Misfit()
        buf_put(&self.data, <char *>&x, 8)
        buf_put(&self.valid, &ok, 1)
        self.rows += 1
        return 0

    cdef object array(self, object type):
        return pa.Array.from_buffers(
            type, self.rows, [_bitmap(&self.valid, self.rows) if self.nulls else None, _buffer(&self.data)],
            null_count=self.nulls,
        )


cdef class _Strings:
    cdef Buf data
    cdef Buf offsets
    cdef Buf valid
    cdef Py_ssize_t rows, nulls
    cdef Py_ssize_t saved[5]

    cdef void save(self) noexcept:
        self.saved[0], self.saved[1], self.saved[2] = self.data.size, self.offsets.size, self.valid.size
        self.saved[3], self.saved[4] = self.rows, self.nulls

    cdef void restore(self) noexcept:
        self.data.size, self.offsets.size, self.valid.size = self.saved[0], self.saved[1], self.saved[2]
        self.rows, self.nulls = self.saved[3], self.saved[4]

    def __cinit__(self):
        cdef int32_t zero = 0
        memset(&self.data, 0, sizeof(Buf))
        memset(&self.offsets, 0, sizeof(Buf))
        memset(&self.valid, 0, sizeof(Buf))
        buf_put(&self.offsets, <char *>&zero, 4)

    def __dealloc__(self):
        free(self.data.data)
        free(self.offsets.data)
        free(self.valid.data)

    cdef int add_raw(self, const char *s, Py_ssize_t n, char ok) except -1:
        cdef int32_t end
        buf_put(&self.data, s, n)
        if self.data.size > 2147483647:
            raise Misfit()
        end = <int32_t>self.data.size
        buf_put(&self.offsets, <char *>&end, 4)
        buf_put(&self.valid, &ok, 1)
        self.rows += 1
        if not ok:
            self.nulls += 1
        return 0

    cdef int add(self, object v) except -1:
        cdef Py_ssize_t n
        cdef const char *p
        if v is None:
            return self.add_raw(NULL, 0, 0)
        if not isinstance(v, str):
            raise Misfit()
        try:
            p = PyUnicode_AsUTF8AndSize(v, &n)
        except UnicodeError:
            raise Misfit()
        return self.add_raw(p, n, 1)

    cdef object array(self, object type):
        return pa.Array.from_buffers(
            type, self.rows,
            [_bitmap(&self.valid, self.rows) if self.nulls else None, _buffer(&self.offsets), _buffer(&self.data)],
            null_count=self.nulls,
        )


from binlake.events.rows import ABSENT as _ABSENT_OBJ, Rows as _ROWS_CLS

cdef object _ABSENT = _ABSENT_OBJ
cdef object _ROWS = _ROWS_CLS
cdef frozenset _ROW_OPS = frozenset(("insert", "update", "delete"))


cdef bint _has_key(const Py_ssize_t *pk, Py_ssize_t n, object image) except -1:
    """Whether ``changes._key`` finds a key in ``image`` (``pk``: column numbers in column
    order): not without a key or image, or when the image does not carry one of its columns;
    an index past the image raises the reference's IndexError."""
    cdef Py_ssize_t i, k
    cdef object v
    if n == 0 or image is None:
        return 0
    for i in range(n):
        k = pk[i]
        if PyList_CheckExact(image) and 0 <= k < PyList_GET_SIZE(image):
            v = <object>PyList_GET_ITEM(image, k)
        elif PyTuple_CheckExact(image) and 0 <= k < PyTuple_GET_SIZE(image):
            v = <object>PyTuple_GET_ITEM(image, k)
        else:
            v = PySequence_GetItem(image, k)
        if v is _ABSENT:
            return 0
    return 1


cdef inline void put_be(char *p, uint64_t v, int width) noexcept:
    cdef int i
    for i in range(width - 1, -1, -1):
        p[i] = <char>(v & 0xFF)
        v >>= 8


cdef int order_key(_Strings out, object k) except -1:
    """``OrderKey.encode()``: >QQI6sIIB; a key of another shape or out of range is the pure path's."""
    cdef char b[35]
    cdef int i
    cdef uint64_t x
    cdef object f
    cdef int widths[7]
    cdef int at = 0
    widths[:] = [8, 8, 4, 6, 4, 4, 1]
    if not PyTuple_CheckExact(k) and not isinstance(k, tuple) or len(k) != 7:
        raise Misfit()
    for i in range(7):
        f = <object>PyTuple_GET_ITEM(k, i)
        if i == 3:
            if not PyBytes_CheckExact(f) or PyBytes_GET_SIZE(f) != 6:
                raise Misfit()
            memcpy(b + at, PyBytes_AS_STRING(f), 6)
        else:
            if not PyLong_CheckExact(f):
                raise Misfit()
            try:
                x = PyLong_AsUnsignedLongLong(f)
            except OverflowError:
                raise Misfit()
            if widths[i] < 8 and x >> (8 * widths[i]):
                raise Misfit()
            put_be(b + at, x, widths[i])
        at += widths[i]
    return out.add_raw(b, 35, 1)


cdef class BatchBuilder:
    """A change-log batch being filled change by change (``changelog._batch`` is the reference):
    every field but ``columns`` into buffers, and per change the index of its layout among the
    distinct layouts (None for a name change). Changes are not held: they die young, which spares
    the cycle collector a batch of live tuples. ``images``: layout -> ``LayoutImages`` (compiled);
    ``name_images``: a name change -> its before and after ``(value, metadata)`` or None."""

    cdef _Strings source, file, gtid, db, table, op, okey
    cdef _Int64s file_number, position, txn_position, last_committed, sequence_number, commit_ts, server_id
    cdef VariantColumn before, after, pk, pk_before
    cdef list strings, ints, variants
    cdef object images, name_images
    cdef ObjectPlan img, key
    cdef object last_layout, last_origin, last_index
    cdef object o_source, o_fno, o_txn, o_gtid, o_lc, o_seq, o_ts
    cdef dict index
    cdef readonly list distinct, which
    cdef readonly Py_ssize_t rows
    # False: a keyed change's ``before`` is NULL (its key is ``pk_before``; ``changelog.Trim.keyed_before``)
    cdef public bint keyed_before
    # ``add_transaction``: what it found for the last table map, source file and transaction source
    cdef object last_tm, last_pk_list, pk_order, tm_layout, tm_db, tm_table
    cdef object last_src, last_fname, last_tsrc, last_fno
    cdef Py_ssize_t *pk_c  # pk_order in C
    cdef Py_ssize_t npk

    def __cinit__(self):
        self.pk_c = NULL
        self.npk = 0

    def __dealloc__(self):
        free(self.pk_c)

    def __init__(self, images, name_images):
        self.images, self.name_images = images, name_images
        self.source, self.file, self.gtid, self.db = _Strings(), _Strings(), _Strings(), _Strings()
        self.table, self.op, self.okey = _Strings(), _Strings(), _Strings()
        self.file_number, self.position, self.txn_position = _Int64s(), _Int64s(), _Int64s()
        self.last_committed, self.sequence_number, self.commit_ts = _Int64s(), _Int64s(), _Int64s()
        self.server_id = _Int64s()
        self.before, self.after, self.pk, self.pk_before = VariantColumn(), VariantColumn(), VariantColumn(), VariantColumn()
        self.strings = [self.source, self.file, self.gtid, self.db, self.table, self.op, self.okey]
        self.ints = [
            self.file_number, self.position, self.txn_position, self.last_committed, self.sequence_number,
            self.commit_ts, self.server_id,
        ]
        self.variants = [self.before, self.after, self.pk, self.pk_before]
        self.index, self.distinct, self.which = {}, [], []
        self.rows = 0
        self.keyed_before = True

    def add(self, c):
        """One change; on any error (``Misfit`` included) nothing of it is kept, and the error is
        raised for the caller to build that change the pure way."""
        cdef object col
        for col in self.strings:
            (<_Strings>col).save()
        for col in self.ints:
            (<_Int64s>col).save()
        for col in self.variants:
            (<VariantColumn>col).save()
        try:
            self._add(c)
        except BaseException:
            for col in self.strings:
                (<_Strings>col).restore()
            for col in self.ints:
                (<_Int64s>col).restore()
            for col in self.variants:
                (<VariantColumn>col).restore()
            raise
        self.rows += 1

    cdef void _save(self) noexcept:
        self.source.save(); self.file.save(); self.gtid.save(); self.db.save(); self.table.save()
        self.op.save(); self.okey.save()
        self.file_number.save(); self.position.save(); self.txn_position.save(); self.last_committed.save()
        self.sequence_number.save(); self.commit_ts.save(); self.server_id.save()
        self.before.save(); self.after.save(); self.pk.save(); self.pk_before.save()

    cdef void _restore(self) noexcept:
        self.source.restore(); self.file.restore(); self.gtid.restore(); self.db.restore(); self.table.restore()
        self.op.restore(); self.okey.restore()
        self.file_number.restore(); self.position.restore(); self.txn_position.restore()
        self.last_committed.restore(); self.sequence_number.restore(); self.commit_ts.restore()
        self.server_id.restore()
        self.before.restore(); self.after.restore(); self.pk.restore(); self.pk_before.restore()

    def add_transaction(self, t, source, Py_ssize_t start, Py_ssize_t size, layouts, file_number, file_name):
        """The row changes of the finished, non-DDL transaction ``t`` (``changes.row_changes(t,
        None, source)`` is the reference) from its change number ``start`` on, each straight from
        the decoded rows into the buffers, until the batch holds ``size`` rows. ``layouts``,
        ``file_number``, ``file_name``: the change model's (``changes._layouts`` …). Returns (the
        next change's number, status): 0 every change taken, 1 the batch is full, 2 that change is
        not taken (a misfit, or an error the reference may raise; nothing of it is kept): the
        caller adds it and the rest of ``t`` change by change."""
        cdef list events = t.events
        cdef object ev, b, tm, rows, pair, before, after, kb, ka, op, offset, sid, gtid, lc, seq, ts, tsrc
        cdef object fno, tstart
        cdef Py_ssize_t ei, ri, nrows, n = 0
        cdef uint64_t major = 0, minor = 0
        cdef bint bad_key = 0, update, has_a, has_b
        cdef char okey[35]
        tsrc = t.source
        if tsrc is not self.last_tsrc:
            self.last_fno = file_number(tsrc)
            self.last_tsrc = tsrc
        fno = self.last_fno
        tstart = t.start
        gtid, lc, seq = t.gtid, t.last_committed, t.sequence_number
        ts = t.commit_time_us or None
        if PyLong_CheckExact(fno) and PyLong_CheckExact(tstart) and fno >= 0 and tstart >= 0:
            try:
                major = PyLong_AsUnsignedLongLong(fno)
                minor = PyLong_AsUnsignedLongLong(tstart)
            except OverflowError:
                bad_key = 1
        else:
            bad_key = 1
        put_be(okey, major, 8)
        put_be(okey + 8, minor, 8)
        memset(okey + 16, 0, 10)
        okey[34] = 1
        for ei in range(len(events)):
            ev = events[ei]
            b = ev.body
            if not isinstance(b, _ROWS):
                continue
            tm = b.table
            if tm is None or b.undecoded_reason:
                continue
            rows = b.rows
            nrows = len(rows)
            if n + nrows <= start:
                n += nrows
                continue
            if tm is not self.last_tm or tm.primary_key is not self.last_pk_list:
                try:
                    self._use_table(tm, layouts)
                except Exception:  # the reference's error, raised where it raises it
                    return n if n > start else start, 2
            op = b.operation
            if op not in _ROW_OPS or ei > 0xFFFFFFFF:
                return n if n > start else start, 2
            update = op == "update"
            if ev.source is not self.last_src:
                self.last_fname = file_name(ev.source)
                self.last_src = ev.source
            offset = ev.offset
            sid = ev.header.server_id
            try:
                self._use_layout(self.tm_layout)
            except Exception:
                return n if n > start else start, 2
            put_be(okey + 26, <uint64_t>ei, 4)
            for ri in range(nrows):
                if n < start:
                    n += 1
                    continue
                if bad_key or ri > 0xFFFFFFFF:
                    return n, 2
                pair = rows[ri]
                self._save()
                try:
                    if not PyTuple_CheckExact(pair) or PyTuple_GET_SIZE(pair) != 2:
                        raise Misfit()
                    before = <object>PyTuple_GET_ITEM(pair, 0)
                    after = <object>PyTuple_GET_ITEM(pair, 1)
                    has_b = _has_key(self.pk_c, self.npk, before)
                    # a minimal after image leaves out a key that did not change: the before image has it
                    has_a = _has_key(self.pk_c, self.npk, after)
                    self.source.add(source)
                    self.file.add(self.last_fname)
                    self.file_number.add(fno)
                    self.position.add(offset)
                    self.txn_position.add(tstart)
                    put_be(okey + 30, <uint64_t>ri, 4)
                    self.okey.add_raw(okey, 35, 1)
                    self.gtid.add(gtid)
                    self.last_committed.add(lc)
                    self.sequence_number.add(seq)
                    self.commit_ts.add(ts)
                    self.server_id.add(sid)
                    self.db.add(self.tm_db)
                    self.table.add(self.tm_table)
                    self.op.add(op)
                    self.before.put(self.img, before if self.keyed_before or not (has_a or has_b) else None)
                    self.after.put(self.img, after)
                    self.pk.put(self.key, after if has_a else before if has_b else None, self.pk_c)
                    self.pk_before.put(self.key, before if update and has_b else None, self.pk_c)
                except Exception:
                    self._restore()
                    return n, 2
                self.which.append(self.last_index)
                self.rows += 1
                n += 1
                if self.rows >= size:
                    return n, 1
        return n, 0

    cdef int _use_table(self, object tm, object layouts) except -1:
        """The layout, key columns (``changes._column_order``) and names of a table map."""
        cdef Py_ssize_t j
        self.last_tm = None
        self.tm_layout = layouts(tm)
        pk = tm.primary_key
        self.pk_order = tuple(pk if len(pk) < 2 or pk == sorted(pk) else sorted(pk))
        self.npk = 0
        free(self.pk_c)
        self.pk_c = <Py_ssize_t *>malloc((len(self.pk_order) + 1) * sizeof(Py_ssize_t))
        if self.pk_c == NULL:
            raise MemoryError()
        for j in range(len(self.pk_order)):
            self.pk_c[j] = self.pk_order[j]
        self.npk = len(self.pk_order)
        self.tm_db, self.tm_table = tm.database, tm.table
        self.last_tm, self.last_pk_list = tm, pk
        return 0

    cdef int _use_layout(self, object layout) except -1:
        cdef object enc, index
        if layout is not self.last_layout:
            enc = self.images(layout)
            self.img, self.key = enc.image, enc.key
            self.last_layout = layout
            index = self.index.get(id(layout))
            if index is None:
                index = self.index[id(layout)] = len(self.distinct)
                self.distinct.append(layout)
            self.last_index = index
        return 0

    cdef int _add(self, object c) except -1:
        cdef object origin, layout, docs, enc, index
        if not isinstance(c, tuple) or PyTuple_GET_SIZE(c) != 13:
            raise Misfit()
        origin = <object>PyTuple_GET_ITEM(c, 8)
        if origin is not self.last_origin:
            self.o_source, self.o_fno, self.o_txn = origin.source, origin.file_number, origin.txn_position
            self.o_gtid, self.o_lc = origin.gtid, origin.last_committed
            self.o_seq, self.o_ts = origin.sequence_number, origin.commit_time_us
            self.last_origin = origin
        self.source.add(self.o_source)
        self.file.add(<object>PyTuple_GET_ITEM(c, 9))
        self.file_number.add(self.o_fno)
        self.position.add(<object>PyTuple_GET_ITEM(c, 10))
        self.txn_position.add(self.o_txn)
        order_key(self.okey, <object>PyTuple_GET_ITEM(c, 12))
        self.gtid.add(self.o_gtid)
        self.last_committed.add(self.o_lc)
        self.sequence_number.add(self.o_seq)
        self.commit_ts.add(self.o_ts)
        self.server_id.add(<object>PyTuple_GET_ITEM(c, 11))
        self.db.add(<object>PyTuple_GET_ITEM(c, 1))
        self.table.add(<object>PyTuple_GET_ITEM(c, 2))
        self.op.add(<object>PyTuple_GET_ITEM(c, 0))
        layout = <object>PyTuple_GET_ITEM(c, 7)
        if layout is None:  # a rename or drop: names, no layout, no key
            docs = self.name_images(c)
            for i in range(2):
                col = self.before if i == 0 else self.after
                if docs[i] is None:
                    col.add_null()
                else:
                    col.add_bytes(docs[i][0], docs[i][1])
            self.pk.add_null()
            self.pk_before.add_null()
            self.which.append(None)
            return 0
        self._use_layout(layout)
        key = <object>PyTuple_GET_ITEM(c, 5)
        self.before.add(self.img, <object>PyTuple_GET_ITEM(c, 3) if self.keyed_before or key is None else None)
        self.after.add(self.img, <object>PyTuple_GET_ITEM(c, 4))
        self.pk.add(self.key, key)
        self.pk_before.add(self.key, <object>PyTuple_GET_ITEM(c, 6))
        self.which.append(self.last_index)
        return 0

    def arrays(self, fields):
        """The arrays of every field but ``columns``, in ``fields`` order (the schema's (name, type))."""
        built = {
            "source": self.source, "file": self.file, "file_number": self.file_number, "position": self.position,
            "txn_position": self.txn_position, "order_key": self.okey, "gtid": self.gtid,
            "last_committed": self.last_committed, "sequence_number": self.sequence_number,
            "commit_ts": self.commit_ts, "server_id": self.server_id, "db": self.db, "table": self.table,
            "op": self.op, "before": self.before, "after": self.after, "pk": self.pk, "pk_before": self.pk_before,
        }
        arrays = []
        for name, type in fields:
            if name == "columns":
                continue
            b = built[name]
            if isinstance(b, VariantColumn):
                arrays.append(b.array(type))
            elif isinstance(b, _Strings):
                arrays.append((<_Strings>b).array(type))
            else:
                arrays.append((<_Int64s>b).array(type))
        return arrays


# ---- transactions for the one pass (``binlake.txn.TransactionGrouper`` is the reference) ----

from binlake.events.table_map import TableMap as _TABLE_MAP_CLS
from binlake.events.query import Query as _QUERY_CLS
from binlake.events.control import Xid as _XID_CLS
from binlake import txn as _txn

cdef object _TABLE_MAP = _TABLE_MAP_CLS
cdef object _QUERY = _QUERY_CLS
cdef object _XID = _XID_CLS
cdef frozenset _OWN_RULES = frozenset(int(c) for c in _txn._OWN_RULES)
cdef frozenset _GTID_EVENTS = frozenset(int(c) for c in _txn.GTID_EVENTS)
cdef long _TRANSACTION_PAYLOAD = 40
cdef object _COMMIT = _txn.COMMIT


cdef class Grouper:
    """``TransactionGrouper.feed`` with the events of a plain transaction in C: its GTID (none
    open, nothing pending), BEGIN, table maps, rows events and XID. Every other event goes to the
    pure grouper ``g``, whose state this shares (``g.current`` …, read and written in its
    ``__dict__``), so its rules stay the one reference."""

    cdef object g
    cdef dict d
    cdef bint keep
    cdef list _empty

    def __init__(self, g):
        self.g = g
        self.d = g.__dict__
        self.keep = g.keep_events
        for name in ("current", "pending", "_payload_size", "_last_end", "_last_source"):
            if name not in self.d:
                raise ValueError("not a TransactionGrouper")

    def feed(self, file_seq, ev):
        """``TransactionGrouper.feed``: the transactions ``ev`` finishes."""
        return self._feed(file_seq, ev)

    def pull(self, it, file_seq):
        """Events from the iterator ``it`` until one finishes a transaction: the transactions it
        finishes (unfinished ones included, as ``feed`` gives them); None when ``it`` is exhausted."""
        cdef list out
        for ev in it:
            out = self._feed(file_seq, ev)
            if out:
                return out
        return None

    cdef list _feed(self, object file_seq, object ev):
        cdef object body = ev.body
        cdef object cls = type(body)
        cdef object t = self.d["current"]
        cdef object code = ev.kind
        if t is not None:
            if (cls is _ROWS or cls is _TABLE_MAP) and code not in _OWN_RULES:
                self._add(t, ev, body, cls)
                return []
            if cls is _QUERY and code not in _OWN_RULES and body.query == "BEGIN":
                self._add(t, ev, body, cls)
                t.began = True  # ``statement_ends``: BEGIN opens, and ends nothing
                return []
            if cls is _XID and code not in _OWN_RULES:
                self._add(t, ev, body, cls)
                t.xid = body.xid
                return [self._finish(t, ev)]
        elif code in _GTID_EVENTS and not self.d["pending"]:
            t = self.g._start(file_seq, ev)
            self.g._take_gtid(t, ev)
            self._add(t, ev, body, cls)
            return []
        return self.g.feed(file_seq, ev)

    cdef int _add(self, object t, object ev, object b, object cls) except -1:
        cdef object size, key
        cdef dict d = self.d
        if self.keep:
            t.events.append(ev)
        if ev.inner_index is None:
            size = ev.header.event_size
            if ev.kind == _TRANSACTION_PAYLOAD:
                d["_payload_size"] = size
        else:
            size = d["_payload_size"]
        d["_last_end"] = ev.offset + size
        d["_last_source"] = ev.source
        if cls is _TABLE_MAP:
            key = (b.database, b.table)
            if key not in t.tables:
                t.tables.append(key)
        elif cls is _ROWS:
            t.rows += len(b.rows) if b.counted is None else b.counted
        return 0

    cdef object _finish(self, object t, object ev):
        """``TransactionGrouper._finish(ev, COMMIT)`` of an XID event."""
        t.kind = _COMMIT
        t.end = ev.offset + (self.d["_payload_size"] if ev.inner_index is not None else ev.header.event_size)
        t.end_source = ev.source
        t.commit_header_ts = ev.header.timestamp
        self.d["current"] = None
        return t
