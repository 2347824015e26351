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

from cpython.buffer cimport PyBuffer_FillInfo
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
from libc.string cimport memchr, memcmp, memcpy, memset, strlen, strstr
from cpython.dict cimport PyDict_CheckExact
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int8_t, int16_t, uint32_t

from binlake.values._bytes cimport be, le
from binlake.events._fastenv cimport Maker, slot
from cpython.ref cimport Py_INCREF, Py_XDECREF
from binlake.values._fastrows cimport (
    BIT, CALL, DATE, DATETIME2, DECIMAL, DOUBLE, FLOAT, INT8, INT16, INT24, INT32, INT64, JSON, STR, TIME2,
    TIMESTAMP2, UINT8, UINT16, UINT24, UINT32, UINT64, YEAR, Fields, Image, Op, RowsDecoder,
    datetime2_fields, decimal_groups, read_value, time2_us, timestamp2_total, valid_date, value_end,
)

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
INTERFACE = 6

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
cdef uint64_t POW10_64[10]
POW10_64[:] = [1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000]
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
    return fields_us(
        PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v), PyDateTime_DATE_GET_HOUR(v),
        PyDateTime_DATE_GET_MINUTE(v), PyDateTime_DATE_GET_SECOND(v), PyDateTime_DATE_GET_MICROSECOND(v),
    )


cdef inline int64_t fields_us(int64_t y, int64_t mo, int64_t d, int64_t h, int64_t mi, int64_t sec, int64_t us) noexcept:
    """Microseconds from 1970-01-01 00:00 to a date and time of day."""
    return ((((ordinal(y, mo, d) - EPOCH_DAY) * 24 + h) * 60 + mi) * 60 + sec) * 1000000 + us


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
    return put_unscaled(b, u, kind, scale)


cdef int put_unscaled(Buf *b, i128 u, int kind, int scale) except -1:
    """A decimal of the kind's width from its unscaled integer and scale; 1 past the width."""
    cdef uint64_t lo
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
    return put_u64_decimal(b, u)


cdef int put_u64_decimal(Buf *b, uint64_t u) except -1:
    """An unsigned 64-bit integer as a decimal16 of scale 0."""
    put_le(b, H_DEC16, 0, 1)  # the header, then scale 0
    put_le_tail(b, u)
    return put_le_tail(b, 0)


cdef int put_time(Buf *b, object td, int fsp) except -1:
    """``format_time(td, fsp)`` as a variant string."""
    return put_time_us(
        b, (<int64_t>timedelta_days(td) * 86400 + timedelta_seconds(td)) * 1000000 + timedelta_microseconds(td), fsp
    )


cdef int put_time_us(Buf *b, int64_t us, int fsp) except -1:
    """A TIME of ``us`` signed microseconds as ``format_time`` writes it, a variant string."""
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


cdef int put_float(Buf *b, double d, int kind) except -1:
    """A double as a variant float (``K_FLOAT``; 1 past its range) or double."""
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


cdef int put_value(Buf *b, object v, int kind, int arg) except -1:
    """One non-NULL value of a field's kind; 1 where the field's pure encoder must take it."""
    cdef long long x
    cdef int overflow
    cdef Py_ssize_t n
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
        return put_float(b, PyFloat_AS_DOUBLE(v), kind)
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
    cdef Py_ssize_t n
    cdef const unsigned char *p
    try:
        p = <const unsigned char *>PyUnicode_AsUTF8AndSize(s, &n)
    except UnicodeError:
        return 1
    return json_bytes(b, p, n)


cdef int json_bytes(Buf *b, const unsigned char *p, Py_ssize_t n) except -1:
    """UTF-8 text as ``json_string`` quotes its str."""
    cdef Py_ssize_t i, start = 0
    cdef unsigned char c
    cdef char esc[6]
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


cdef int json_double(Buf *b, double v) except -1:
    """A double as ``json.dumps`` writes it; 1 where MySQL writes it otherwise (``double_text``)."""
    cdef double f = fabs(v)
    cdef char *r
    if not isfinite(f) or 1e-15 <= f < 1e-4 or 1e15 <= f < 1e16:
        return 1  # MySQL writes these otherwise than repr: ``double_text``'s
    r = PyOS_double_to_string(v, c'r', 0, Py_DTSF_ADD_DOT_0, NULL)
    try:
        if strstr(r, "e+") != NULL:
            return 1  # MySQL writes 1e20: ``double_text``'s
        buf_put(b, r, strlen(r))
    finally:
        PyMem_Free(r)
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
        return j_int(b, x)
    if PyFloat_CheckExact(v):
        return json_double(b, PyFloat_AS_DOUBLE(v))
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


# ---- a binary JSON document straight to its text (``_fastjson`` + ``json_text`` is the reference) ----

cdef enum:  # json_binary.cc's value types
    J_SMALL_OBJECT, J_LARGE_OBJECT, J_SMALL_ARRAY, J_LARGE_ARRAY, J_LITERAL, J_INT16, J_UINT16, J_INT32,
    J_UINT32, J_INT64, J_UINT64, J_DOUBLE, J_STRING
    J_MAX_DEPTH = 150

cdef int J_WIDTH[16]
J_WIDTH[:] = [0, 0, 0, 0, 1, 2, 2, 4, 4, 8, 8, 8, 0, 0, 0, 0]


cdef struct JDoc:
    const unsigned char *s
    Py_ssize_t size
    Py_ssize_t budget  # ``_fastjson``'s: bytes left to decode (overlapping values fail there)


cdef int json_doc(Buf *b, const unsigned char *s, Py_ssize_t n) except -1:
    """The text ``Json.text`` gives of the binary document ``s`` (a JSON column's value) when
    ``_fastjson.decode_json_column`` decodes it to a plain value ``json_text`` writes, read in
    one walk with no Python value; 1 for anything else (no bytes, an opaque value, a check the
    decoder fails, text that is not UTF-8, keys out of order (a repeated key), a number
    ``json_text`` does not write): the decoded value then."""
    cdef JDoc d
    if n == 0:
        return 1
    d.s, d.size, d.budget = s, n, n
    if s[0] <= J_LARGE_ARRAY:
        return j_container(b, &d, s[0], 1, n, 0)
    return j_scalar(b, &d, s[0], 1, n)


cdef inline bint j_need(JDoc *d, Py_ssize_t pos, Py_ssize_t n) noexcept:
    return 0 <= pos and pos + n <= d.size


cdef inline bint j_spend(JDoc *d, Py_ssize_t n) noexcept:
    d.budget -= n
    return d.budget >= 0


cdef inline int j_int(Buf *b, long long x) except -1:
    buf_reserve(b, 24)
    b.size += snprintf(b.data + b.size, 24, "%lld", x)
    return 0


cdef int j_string(Buf *b, const unsigned char *s, Py_ssize_t n) except -1:
    if not is_utf8(s, n):  # decoded with surrogates, which ``json_string`` does not write
        return 1
    return json_bytes(b, s, n)


cdef int j_scalar(Buf *b, JDoc *d, int t, Py_ssize_t pos, Py_ssize_t end) except -1:
    cdef Py_ssize_t n = 0, p
    cdef uint64_t u
    cdef double f
    cdef int i
    cdef unsigned char c
    if t < 16 and J_WIDTH[t] and not j_need(d, pos, J_WIDTH[t]):
        return 1
    if t == J_LITERAL:
        c = d.s[pos]
        if c > 2:
            return 1
        return buf_put(b, "null" if c == 0 else "true" if c == 1 else "false", 4 if c < 2 else 5)
    if t == J_INT16:
        return j_int(b, <int16_t>le(d.s + pos, 2))
    if t == J_UINT16:
        return j_int(b, <long long>le(d.s + pos, 2))
    if t == J_INT32:
        return j_int(b, <int32_t>le(d.s + pos, 4))
    if t == J_UINT32:
        return j_int(b, <long long>le(d.s + pos, 4))
    if t == J_INT64:
        return j_int(b, <int64_t>le(d.s + pos, 8))
    if t == J_UINT64:
        u = le(d.s + pos, 8)
        if u > <uint64_t>9223372036854775807:
            return 1
        return j_int(b, <long long>u)
    if t == J_DOUBLE:
        memcpy(&f, d.s + pos, 8)
        return json_double(b, f)
    if t == J_STRING:
        p = pos
        for i in range(5):  # the length: 7 bits per byte, low bits first
            if p >= end or not j_need(d, p, 1):
                return 1
            c = d.s[p]
            p += 1
            n |= <Py_ssize_t>(c & 0x7F) << (7 * i)
            if not c & 0x80:
                break
        else:
            return 1
        if p + n > end or not j_spend(d, n):
            return 1
        return j_string(b, d.s + p, n)
    return 1  # an opaque value, an unknown type


cdef bint repeated_key(JDoc *d, Py_ssize_t base, Py_ssize_t kp, int osz, Py_ssize_t count) noexcept:
    """Whether two of an object's keys (checked inside it) are the same bytes; past 32 keys, out
    of order: taken as yes (the decoder's dict decides)."""
    cdef Py_ssize_t i, j, ioff, ilen, joff, jlen, w = osz + 2
    if count > 32:
        return 1
    for i in range(count):
        ioff = <Py_ssize_t>le(d.s + kp + i * w, osz)
        ilen = <Py_ssize_t>le(d.s + kp + i * w + osz, 2)
        for j in range(i):
            joff = <Py_ssize_t>le(d.s + kp + j * w, osz)
            jlen = <Py_ssize_t>le(d.s + kp + j * w + osz, 2)
            if ilen == jlen and memcmp(d.s + base + ioff, d.s + base + joff, ilen) == 0:
                return 1
    return 0


cdef int j_container(Buf *b, JDoc *d, int t, Py_ssize_t base, Py_ssize_t end, int depth) except -1:
    cdef bint large = t == J_LARGE_OBJECT or t == J_LARGE_ARRAY
    cdef bint is_object = t == J_SMALL_OBJECT or t == J_LARGE_OBJECT
    cdef int osz = 4 if large else 2, vt
    cdef Py_ssize_t count, size, cend, kp, vp, k, koff, klen, pkoff = 0, pklen = -1, q, n
    cdef bint sorted_keys = True
    if depth > J_MAX_DEPTH or base + 2 * osz > end or not j_need(d, base, 2 * osz):
        return 1
    count = <Py_ssize_t>le(d.s + base, osz)
    size = <Py_ssize_t>le(d.s + base + osz, osz)
    if not j_spend(d, count) or base + size > end:
        return 1
    cend = base + size
    kp = base + 2 * osz
    vp = kp
    if is_object:
        if kp + count * (osz + 2) > cend:
            return 1
        for k in range(count):  # every key inside; in MySQL's order (length, bytes), none repeated
            koff = <Py_ssize_t>le(d.s + kp + k * (osz + 2), osz)
            klen = <Py_ssize_t>le(d.s + kp + k * (osz + 2) + osz, 2)
            if base + koff + klen > cend:
                return 1
            if k and (klen < pklen or klen == pklen and memcmp(d.s + base + koff, d.s + base + pkoff, klen) <= 0):
                sorted_keys = False
            pkoff, pklen = koff, klen
        if not sorted_keys and repeated_key(d, base, kp, osz, count):
            return 1  # the decoded dict keeps one of them
        vp = kp + count * (osz + 2)
    if vp + count * (1 + osz) > cend:
        return 1
    buf_put(b, "{" if is_object else "[", 1)
    for k in range(count):
        if k:
            buf_put(b, ", ", 2)
        if is_object:
            koff = <Py_ssize_t>le(d.s + kp + k * (osz + 2), osz)
            klen = <Py_ssize_t>le(d.s + kp + k * (osz + 2) + osz, 2)
            if j_string(b, d.s + base + koff, klen):
                return 1
            buf_put(b, ": ", 2)
        vt = d.s[vp]
        if vt == J_INT16:
            j_int(b, <int16_t>le(d.s + vp + 1, 2))
        elif vt == J_LITERAL and d.s[vp + 1] <= 1:
            buf_put(b, "true" if d.s[vp + 1] else "null", 4)
        elif vt == J_LITERAL or vt == J_UINT16 or (large and (vt == J_INT32 or vt == J_UINT32)):
            if j_scalar(b, d, vt, vp + 1, cend):
                return 1
        else:
            q = base + <Py_ssize_t>le(d.s + vp + 1, osz)
            if q >= cend or not j_need(d, q, 1):
                return 1
            if vt == J_STRING and d.s[q] < 0x80:  # a string of fewer than 128 bytes
                n = d.s[q]
                if q + 1 + n > cend or not j_spend(d, n) or j_string(b, d.s + q + 1, n):
                    return 1
            elif vt <= J_LARGE_ARRAY:
                if j_container(b, d, vt, q, cend, depth + 1):
                    return 1
            elif j_scalar(b, d, vt, q, cend):
                return 1
        vp += 1 + osz
    return buf_put(b, "}" if is_object else "]", 1)


cdef inline int width(uint64_t n) noexcept:
    return 1 if n < (1 << 8) else 2 if n < (1 << 16) else 3 if n < (1 << 24) else 4


# ---- row images straight from a rows event's bytes (``_fastrows`` reads them) ----

cdef enum:
    NOT_IN_IMAGE = -1  # ``RawImage.pos`` of a column the image does not carry
    NULL_VALUE = -2  # of a NULL

# how a STR operation's bytes become text (``_fastrows.text``): kept as bytes (a binary collation),
# UTF-8, a codec that reads ASCII bytes as themselves, any other codec
cdef enum:
    TEXT_BINARY = 0
    TEXT_UTF8 = 1
    TEXT_ASCII = 2
    TEXT_OTHER = 3

# the integer operations INT8 .. INT64 (``_fastrows.Code``, in that order): their bytes, their sign
cdef int _INT_WIDTH[INT64 + 1]
cdef bint _INT_SIGNED[INT64 + 1]
for _code, _width, _signed in (
    (INT8, 1, 1), (UINT8, 1, 0), (INT16, 2, 1), (UINT16, 2, 0), (INT24, 3, 1), (UINT24, 3, 0),
    (INT32, 4, 1), (UINT32, 4, 0), (INT64, 8, 1),
):
    _INT_WIDTH[_code], _INT_SIGNED[_code] = _width, _signed

cdef dict _TEXT_CLASSES = {None: TEXT_BINARY, b"utf-8": TEXT_UTF8, b"ascii": TEXT_ASCII, b"latin-1": TEXT_ASCII}


cdef bint is_utf8(const unsigned char *s, Py_ssize_t n) noexcept:
    """Whether Python's strict UTF-8 decoder takes ``s`` (no overlong forms, surrogates or code
    points past U+10FFFF): then its text's UTF-8 is ``s`` itself."""
    cdef Py_ssize_t i = 0
    cdef unsigned char c, lo, hi
    cdef int more, k
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2 or c > 0xF4:  # a continuation byte, an overlong lead, past U+10FFFF
            return 0
        more = 1 if c < 0xE0 else 2 if c < 0xF0 else 3
        # the second byte's range: no overlong forms (E0, F0), surrogates (ED), past U+10FFFF (F4)
        lo = 0xA0 if c == 0xE0 else 0x90 if c == 0xF0 else 0x80
        hi = 0x9F if c == 0xED else 0x8F if c == 0xF4 else 0xBF
        if i + more >= n:
            return 0
        if not lo <= s[i + 1] <= hi:
            return 0
        for k in range(2, more + 1):
            if not 0x80 <= s[i + k] <= 0xBF:
                return 0
        i += more + 1
    return 1


cdef bint is_ascii(const unsigned char *s, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        if s[i] >= 0x80:
            return 0
    return 1


cdef inline int json_doc_at(const unsigned char *q, int width) except -1:
    """``json_doc`` of a JSON column's value at ``q`` (its length in ``width`` bytes, then the
    binary document) into ``_text``; nonzero where it leaves the document to the decoder."""
    _text.size = 0
    return json_doc(&_text, q + width, <Py_ssize_t>le(q, width))


cdef class RawImage:
    """One image of a rows event's row as bytes: where each column's value starts (``parse``),
    then each value written as a variant from those bytes (``put``) or read as the decoder reads
    it (``value``). Made per image program of a compiled ``RowsDecoder``; which columns the image
    carries never changes, so only theirs are set per row."""

    cdef Image im
    cdef readonly Py_ssize_t ncols
    cdef Py_ssize_t *pos  # per column: its value's offset, NOT_IN_IMAGE or NULL_VALUE
    cdef int *opi  # per column: its operation's index
    cdef int *texts  # per operation: its TEXT_* class
    cdef int *jsons  # the operations of JSON columns (``check``), ``njson`` of them
    cdef int njson
    cdef list called  # per column: the value a CALL operation's decoder gave
    cdef object buf
    cdef const unsigned char *s
    cdef Py_ssize_t size

    def __cinit__(self):
        self.pos = NULL
        self.opi = NULL
        self.texts = NULL
        self.jsons = NULL

    def __dealloc__(self):
        free(self.pos)
        free(self.opi)
        free(self.texts)
        free(self.jsons)

    def __init__(self, Image im, Py_ssize_t ncols):
        cdef Py_ssize_t k, c
        self.im, self.ncols = im, ncols
        self.pos = <Py_ssize_t *>malloc(max(ncols, 1) * sizeof(Py_ssize_t))
        self.opi = <int *>malloc(max(ncols, 1) * sizeof(int))
        self.texts = <int *>malloc(max(im.n, 1) * sizeof(int))
        self.jsons = <int *>malloc(max(im.n, 1) * sizeof(int))
        if not (self.pos and self.opi and self.texts and self.jsons):
            raise MemoryError()
        self.njson = 0
        for k in range(im.n):
            if im.ops[k].code == JSON:
                self.jsons[self.njson] = <int>k
                self.njson += 1
        for k in range(ncols):
            self.pos[k] = NOT_IN_IMAGE
            self.opi[k] = -1
        for k in range(im.n):
            c = im.ops[k].column
            if not 0 <= c < ncols:
                raise ValueError(f"column {c} of {ncols}")
            self.opi[c] = <int>k
            self.texts[k] = _TEXT_CLASSES.get(<object>PyList_GET_ITEM(im.objects, k), TEXT_OTHER) if im.ops[k].code == STR else TEXT_OTHER
        self.called = [None] * ncols

    cdef int parse(self, object buf, const unsigned char *s, Py_ssize_t size, Py_ssize_t *pp) except -1:
        """Find the values of the image at ``pp`` (moved past it); damage raises as decoding does."""
        cdef Image im = self.im
        cdef Py_ssize_t p = pp[0], nb, k, c
        cdef const unsigned char *nulls
        cdef Op *op
        self.buf, self.s, self.size = buf, s, size
        if im.n == 0:  # no columns: no bytes, not even a NULL bitmap
            return 0
        nb = (im.n + 7) >> 3
        if p + nb > size:
            raise ValueError("row image ends inside its NULL bitmap")
        nulls = s + p
        p += nb
        for k in range(im.n):
            op = &im.ops[k]
            c = op.column
            if nulls[k >> 3] >> (k & 7) & 1:
                self.pos[c] = NULL_VALUE
            elif op.code == CALL:
                self.pos[c] = p
                value, end = (<object>PyList_GET_ITEM(im.objects, k))(buf, p)
                if end < p or end > size:
                    raise ValueError(f"a value runs past the row image ({end} of {size} bytes)")
                self.called[c] = value
                p = end
            else:
                self.pos[c] = p
                p = value_end(op, s, size, p)
        pp[0] = p
        return 0

    cdef int check(self) except -1:
        """Decode what of the image only decoding refuses — a JSON document: its bytes walk whole
        whatever they hold — for an image that is not written (a keyed change's ``before`` left
        out of a sync's read): the reference decodes every image and raises there."""
        cdef Py_ssize_t i, c, p
        cdef Op *op
        for i in range(self.njson):
            op = &self.im.ops[self.jsons[i]]
            c = op.column
            p = self.pos[c]
            if p < 0:  # not in the image, or NULL
                continue
            if json_doc_at(self.s + p, op.a):
                self.value(c)  # what the text walk leaves to the decoder: it decodes, or raises
        return 0

    cdef int has(self, const Py_ssize_t *cols, Py_ssize_t n) except -1:
        """Whether the image carries each of ``cols`` (NULL or not): ``_has_key``'s test; a column
        past the image raises the reference's IndexError (``changes._key`` indexes every one)."""
        cdef Py_ssize_t i
        if n == 0:
            return 0
        for i in range(n):
            if cols[i] >= self.ncols:
                raise IndexError("tuple index out of range")
        for i in range(n):
            if cols[i] < 0 or self.pos[cols[i]] == NOT_IN_IMAGE:
                return 0
        return 1

    cdef object value(self, Py_ssize_t col):
        """Column ``col``'s decoded value, as the decoder gives it."""
        cdef Py_ssize_t p = self.pos[col]
        cdef int k = self.opi[col]
        if self.im.ops[k].code == CALL:
            return self.called[col]
        return read_value(&self.im.ops[k], <object>PyList_GET_ITEM(self.im.objects, k), self.buf, self.s, self.size, &p)

    cdef int put(self, Buf *b, Py_ssize_t col, int kind, int arg) except -1:
        """Column ``col``'s non-NULL value written as ``put_value`` writes its decoded value, from
        its bytes; 1 (nothing written) where that takes more than the bytes: ``value`` then."""
        cdef int k = self.opi[col]
        cdef Op *op = &self.im.ops[k]
        cdef const unsigned char *q = self.s + self.pos[col]
        cdef int code = op.code
        cdef int64_t x = 0
        cdef uint64_t u
        cdef Py_ssize_t n, pad
        cdef float f
        cdef double d
        cdef Fields fl
        if kind == K_PY:
            return 1
        if kind <= K_UINT64:
            if code == UINT64 or code == BIT:
                u = le(q, 8) if code == UINT64 else be(q, op.a)
                if u > <uint64_t>9223372036854775807:
                    return 1 if kind != K_UINT64 else put_u64_decimal(b, u)
                x = <int64_t>u
            elif INT8 <= code <= INT64:  # the operations of ``_INT_WIDTH``: little-endian, signed or not
                x = <int64_t>le(q, _INT_WIDTH[code])
                if _INT_SIGNED[code] and _INT_WIDTH[code] < 8 and x >> (8 * _INT_WIDTH[code] - 1):
                    x -= <int64_t>1 << (8 * _INT_WIDTH[code])
            elif code == YEAR:
                x = q[0] + 1900 if q[0] else 0
            else:
                return 1
            if kind == K_INT8:
                return 1 if x < -128 or x > 127 else put_le(b, H_INT8, <uint64_t>x, 1)
            if kind == K_INT16:
                return 1 if x < -32768 or x > 32767 else put_le(b, H_INT16, <uint64_t>x, 2)
            if kind == K_INT32:
                return 1 if x < -2147483648 or x > 2147483647 else put_le(b, H_INT32, <uint64_t>x, 4)
            return put_le(b, H_INT64, <uint64_t>x, 8)
        if code == FLOAT and kind == K_FLOAT:
            memcpy(&f, q, 4)
            return put_float(b, <double>f, kind)
        if code == DOUBLE and kind == K_DOUBLE:
            memcpy(&d, q, 8)
            return put_float(b, d, kind)
        if code == STR and (kind == K_TEXT or kind == K_BYTES or kind == K_ENUM):
            n = <Py_ssize_t>le(q, op.a)
            q += op.a
            if self.texts[k] == TEXT_BINARY:  # bytes, BINARY(n) zero-padded to its width
                if kind == K_ENUM:
                    return 1
                pad = op.b - n if n < op.b else 0
                put_le(b, H_BINARY, <uint64_t>(n + pad), 4)
                buf_put(b, <const char *>q, n)
                buf_reserve(b, pad)
                memset(b.data + b.size, 0, pad)
                b.size += pad
                return 0
            if kind == K_BYTES:
                return 1
            if self.texts[k] == TEXT_UTF8 and is_utf8(q, n) or self.texts[k] == TEXT_ASCII and is_ascii(q, n):
                return put_string(b, <const char *>q, n)
            return 1
        if code == DATE and kind == K_DATE:
            x = <int64_t>le(q, 3)
            if not valid_date(x >> 9, (x >> 5) & 15, x & 31):
                return 1
            return put_le(b, H_DATE, <uint64_t>(ordinal(x >> 9, (x >> 5) & 15, x & 31) - EPOCH_DAY), 4)
        if code == DATETIME2 and kind == K_TS_NTZ:
            if not datetime2_fields(q, op.a, &fl):
                return 1
            return put_le(b, H_TS_NTZ, <uint64_t>fields_us(fl.y, fl.mo, fl.d, fl.h, fl.mi, fl.sec, fl.us), 8)
        if code == TIMESTAMP2 and kind == K_TS:
            x = timestamp2_total(q, op.a)
            if x == 0:  # the zero TIMESTAMP
                return 1
            return put_le(b, H_TS, <uint64_t>x, 8)
        if code == JSON and kind == K_JSON:
            if json_doc_at(q, op.a):
                return 1
            return put_string(b, _text.data, _text.size)
        if code == TIME2 and kind == K_TIME:
            return put_time_us(b, time2_us(q, op.a), arg)
        if code == DECIMAL and K_DEC4 <= kind <= K_DEC16 and op.b == arg:
            return put_raw_decimal(b, q, op.a, op.b, kind)
        return 1


cdef class Transcoder:
    """A rows event's images as ``RawImage``s, by its compiled decoder's programs."""

    cdef readonly RowsDecoder decoder
    cdef readonly RawImage before, after

    def __init__(self, RowsDecoder decoder, Py_ssize_t ncols):
        self.decoder = decoder
        self.before = None if decoder.before is None else RawImage(decoder.before, ncols)
        self.after = None if decoder.after is None else RawImage(decoder.after, ncols)


cdef enum:
    NOT_THIS_WAY = -1  # ``BatchBuilder._raw_rows``: an event it does not write from its bytes

cdef dict _TRANSCODERS = {}  # id(decoder) -> its Transcoder (which holds it: the id stays its)


cdef Transcoder _transcoder(object b, object tm):
    """The transcoder of a rows event's images (``events.rows._row_plan``'s decoder); None when
    the event is not read from its bytes here: PARTIAL_UPDATE_ROWS, a column count its table map
    does not have (decoding says why), a decoder that is not compiled, rows of no columns."""
    cdef object dec
    cdef Transcoder tc
    if b.partial or len(tm.columns) != b.column_count:
        return None
    dec = tm.row_plans.get((b.operation, b.columns_before, b.columns_after))
    if dec is None:
        dec = _row_plan(b, tm)
    dec = dec[1]
    if type(dec) is not RowsDecoder:
        return None
    tc = _TRANSCODERS.get(id(dec))
    if tc is None:
        if len(_TRANSCODERS) >= 1024:
            _TRANSCODERS.clear()
        tc = _TRANSCODERS[id(dec)] = Transcoder(dec, len(tm.columns))
    if (tc.before is None or tc.before.im.n == 0) and (tc.after is None or tc.after.im.n == 0):
        return None
    return tc


cdef int put_raw_decimal(Buf *b, const unsigned char *q, int precision, int scale, int kind) except -1:
    """A binary DECIMAL as ``put_decimal`` writes its Decimal: the unscaled integer; 1 when a group
    holds more than its digits or the number is past the kind's width."""
    cdef uint64_t groups[20]
    cdef int digits[20]
    cdef int ngroups = decimal_groups(q, precision, scale, groups, digits), i
    cdef i128 u = 0
    if ngroups == 0 or precision > 38:
        return 1
    for i in range(ngroups if ngroups > 0 else -ngroups):
        u = u * POW10_64[digits[i]] + <i128>groups[i]
    if ngroups < 0:
        u = -u
    return put_unscaled(b, u, kind, scale)


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
        cdef int i, m = 0, partial = 0
        cdef object v
        cdef PyObject *p
        cdef bint tup = PyTuple_CheckExact(row)
        cdef bint lst = not tup and PyList_CheckExact(row)
        cdef object skip = self.skip
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
            self._start_field(i, m)
            m += 1
            if v is None:
                put_null(s)
            else:
                self._put(i, v)
        return self._finish(out, m, partial)

    cdef int write_raw(self, Buf *out, RawImage img, const Py_ssize_t *remap=NULL) except -1:
        """``write`` of the image ``img`` holds as bytes: each value written from its bytes, without
        a Python value where ``RawImage.put`` can (the same bytes by construction: the rest go
        the way ``write`` takes a decoded value). A column the image lacks in a plan that does not
        skip (a key) is a ``Misfit``."""
        cdef Buf *s = &self.scratch
        cdef Py_ssize_t k, at
        cdef int i, m = 0, partial = 0
        s.size = 0
        for i in range(self.n):
            k = self.index[i] if remap == NULL else remap[self.index[i]]
            if not 0 <= k < img.ncols:
                raise Misfit()
            at = img.pos[k]
            if at == NOT_IN_IMAGE:
                if self.skip is None:
                    raise Misfit()
                partial = 1
                continue
            self._start_field(i, m)
            m += 1
            if at == NULL_VALUE:
                put_null(s)
            elif img.put(s, k, self.kinds[i], self.args[i]):
                self._put(i, img.value(k))
        return self._finish(out, m, partial)

    cdef inline void _start_field(self, int i, int m) noexcept:
        self.offsets[m] = self.scratch.size
        self.present[m] = self.ids[i]

    cdef int _put(self, int i, object v) except -1:
        """Field ``i``'s non-NULL value ``v``: by its kind, else by its pure encoder."""
        cdef object bv
        if put_value(&self.scratch, v, self.kinds[i], self.args[i]):
            bv = self.fallbacks[i](v)
            if not PyBytes_CheckExact(bv):
                bv = bytes(bv)
            buf_put(&self.scratch, PyBytes_AS_STRING(bv), PyBytes_GET_SIZE(bv))
        return 0

    cdef int _finish(self, Buf *out, int m, int partial) except -1:
        """The object's header (ids and offsets of the ``m`` fields written), then its values."""
        cdef Buf *s = &self.scratch
        cdef int i, j, isize, osize, large, maxid = 0
        cdef Py_ssize_t total = s.size
        cdef char *h
        self.offsets[m] = total
        if partial:  # ``variant.object_value``: offsets of the width the total needs
            for i in range(m):
                if self.present[i] > maxid:
                    maxid = self.present[i]
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


cdef inline int put_null(Buf *b) except -1:
    buf_reserve(b, 1)
    b.data[b.size] = <char>H_NULL
    b.size += 1
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
    cdef bint given  # ``array`` was made

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
        """``row``: a decoded image or key, a ``RawImage``, None (a NULL variant)."""
        if row is None:
            return self._end(False)
        if type(row) is RawImage:
            plan.write_raw(&self.values, <RawImage>row, remap)
        else:
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
        """The column as an Arrow struct array of ``type`` (``changelog.VARIANT``); once: its
        buffers go with it."""
        _give_once(&self.given)
        values = pa.Array.from_buffers(
            pa.binary(), self.rows, [None, _buffer(&self.voffsets), _buffer(&self.values)]
        )
        metas = pa.Array.from_buffers(
            pa.binary(), self.rows, [None, _buffer(&self.moffsets), _buffer(&self.metas)]
        )
        validity = _bitmap(&self.valid, self.rows) if self.nulls else None
        return pa.Array.from_buffers(type, self.rows, [validity], null_count=self.nulls, children=[values, metas])


cdef class _Owned:
    """The memory a ``Buf`` held, handed to Arrow as it is (freed with the last buffer on it)."""

    cdef char *data
    cdef Py_ssize_t size

    def __dealloc__(self):
        free(self.data)

    def __getbuffer__(self, Py_buffer *view, int flags):
        PyBuffer_FillInfo(view, self, self.data, self.size, 1, flags)

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef int _give_once(bint *given) except -1:
    """A column's arrays are made once: ``_buffer`` hands its memory over."""
    if given[0]:
        raise RuntimeError("a column's array was already made: its buffers went with it")
    given[0] = 1
    return 0


cdef object _buffer(Buf *b):
    """``b``'s bytes as an Arrow buffer, without a copy: its memory goes with the buffer, ``b`` is
    left empty (a batch's columns are given once, and their builder is not used again)."""
    cdef _Owned owned
    cdef char *p
    if b.size == 0:
        return pa.py_buffer(b"")
    p = <char *>realloc(b.data, b.size)  # (no more than it holds: growing left room)
    if p != NULL:
        b.data = p
    owned = _Owned.__new__(_Owned)
    owned.data, owned.size = b.data, b.size
    b.data, b.size, b.cap = NULL, 0, 0
    return pa.py_buffer(owned)


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
    cdef bint given
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
        _give_once(&self.given)
        return pa.Array.from_buffers(
            type, self.rows, [_bitmap(&self.valid, self.rows) if self.nulls else None, _buffer(&self.data)],
            null_count=self.nulls,
        )


cdef class _Strings:
    cdef Buf data
    cdef Buf offsets
    cdef Buf valid
    cdef bint given
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
        _give_once(&self.given)
        return pa.Array.from_buffers(
            type, self.rows,
            [_bitmap(&self.valid, self.rows) if self.nulls else None, _buffer(&self.offsets), _buffer(&self.data)],
            null_count=self.nulls,
        )


from binlake.decoder import decoded as _decoded
from binlake.events.rows import ABSENT as _ABSENT_OBJ, NOT_ASKED as _NOT_ASKED_STR, Rows as _ROWS_CLS, _row_plan

cdef object _ABSENT = _ABSENT_OBJ
cdef object _NOT_ASKED = _NOT_ASKED_STR
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
    if type(image) is RawImage:
        return (<RawImage>image).has(pk, n)
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


# ---- a batch's ``columns`` field (``binlake.arrowlog.changelog._columns`` is the reference) ----

cdef enum:
    # the buffers of a layout's columns (``_LayoutColumns``) and of a batch's (``columns_array``),
    # by the COLUMN struct's fields: int32 values and their validity, bools and theirs, the names'
    # text and lengths, and the ENUM/SET values (a count per column, -1 for none; texts, lengths)
    C_TYPE, C_META, C_COLLATION, C_TYPE_OK, C_META_OK, C_COLLATION_OK, C_UNSIGNED, C_UNSIGNED_OK, C_PK,
    C_PK_OK, C_NAMES, C_NAME_LENS, C_VALUE_COUNTS, C_VALUES, C_VALUE_LENS, C_BUFS


cdef class _LayoutColumns:
    """One layout's ``columns`` value encoded once: what a row of it appends, buffer by buffer."""

    cdef Buf b[C_BUFS]
    cdef Py_ssize_t n, nvalues

    def __cinit__(self):
        memset(self.b, 0, sizeof(self.b))

    def __dealloc__(self):
        cdef int i
        for i in range(C_BUFS):
            free(self.b[i].data)

    def __init__(self, list columns):
        """``columns``: a ``changelog.columns_value``."""
        cdef int32_t count
        for c in columns:
            self._int(C_TYPE, c["type"])
            self._int(C_META, c["meta"])
            self._int(C_COLLATION, c["collation"])
            self._bool(C_UNSIGNED, c["unsigned"])
            self._bool(C_PK, c["pk"])
            self._text(C_NAMES, C_NAME_LENS, c["name"])
            values = c["values"]
            count = -1 if values is None else len(values)
            buf_put(&self.b[C_VALUE_COUNTS], <char *>&count, 4)
            for v in values or ():
                self._text(C_VALUES, C_VALUE_LENS, v)
                self.nvalues += 1
            self.n += 1

    cdef int _int(self, int field, object v) except -1:
        cdef int32_t x = 0 if v is None else v
        cdef char ok = v is not None
        buf_put(&self.b[field], <char *>&x, 4)
        buf_put(&self.b[field + 3], &ok, 1)  # (each int field's validity is 3 after it)
        return 0

    cdef int _bool(self, int field, object v) except -1:
        cdef char x = v is True
        cdef char ok = v is not None
        if ok and type(v) is not bool:
            raise TypeError(f"a column's flag is {v!r}, not a bool")
        buf_put(&self.b[field], &x, 1)
        buf_put(&self.b[field + 1], &ok, 1)
        return 0

    cdef int _text(self, int data, int lens, object v) except -1:
        cdef Py_ssize_t n
        cdef const char *p = PyUnicode_AsUTF8AndSize(v, &n)
        cdef int32_t n32
        if n > 2147483647:
            raise OverflowError("a column name or value over 2 GB")
        n32 = <int32_t>n
        buf_put(&self.b[data], p, n)
        buf_put(&self.b[lens], <char *>&n32, 4)
        return 0


cdef int _put_ends(Buf *out, const Buf *lens, Py_ssize_t n, int32_t *end) except -1:
    """The end offsets of ``n`` texts of the int32 lengths ``lens``, going on from ``end``."""
    cdef const int32_t *l = <const int32_t *>lens.data
    cdef Py_ssize_t i
    buf_reserve(out, 4 * n)
    for i in range(n):
        if end[0] > 2147483647 - l[i]:
            raise OverflowError("a batch's columns hold over 2 GB of text")
        end[0] += l[i]
        (<int32_t *>(out.data + out.size))[i] = end[0]
    out.size += 4 * n
    return 0


cdef object _validity(Buf *ok, Py_ssize_t n):
    """``ok``'s bitmap, or None where every one of its ``n`` bytes is 1."""
    return _bitmap(ok, n) if memchr(ok.data, 0, n) != NULL else None


cdef class _ColumnsBufs:
    """The buffers ``columns_array`` fills (freed with it)."""

    cdef Buf b[C_BUFS]
    cdef Buf list_ends, list_ok, value_ends, value_ok

    def __cinit__(self):
        cdef int32_t zero = 0
        memset(self.b, 0, sizeof(self.b))
        memset(&self.list_ends, 0, sizeof(Buf))
        memset(&self.list_ok, 0, sizeof(Buf))
        memset(&self.value_ends, 0, sizeof(Buf))
        memset(&self.value_ok, 0, sizeof(Buf))
        buf_put(&self.list_ends, <char *>&zero, 4)  # each offsets buffer starts at 0
        buf_put(&self.value_ends, <char *>&zero, 4)
        buf_put(&self.b[C_NAME_LENS], <char *>&zero, 4)
        buf_put(&self.b[C_VALUE_LENS], <char *>&zero, 4)

    def __dealloc__(self):
        cdef int i
        for i in range(C_BUFS):
            free(self.b[i].data)
        free(self.list_ends.data)
        free(self.list_ok.data)
        free(self.value_ends.data)
        free(self.value_ok.data)


cdef int _COPIED[12]  # the buffers a row takes as its layout has them
_COPIED[:] = [C_TYPE, C_META, C_COLLATION, C_TYPE_OK, C_META_OK, C_COLLATION_OK, C_UNSIGNED, C_UNSIGNED_OK,
              C_PK, C_PK_OK, C_NAMES, C_VALUES]


def columns_array(list layouts, list which, object list_type):
    """The ``columns`` field of a batch whose rows are of the layouts ``layouts[i]`` (each a
    ``changelog.columns_value``) for ``i`` in ``which`` (None: NULL), of type ``list_type``: each
    layout encoded once and its buffers copied per row, not gathered value by value."""
    cdef list encoded = [_LayoutColumns(cols) for cols in layouts]
    cdef _LayoutColumns lc
    cdef _ColumnsBufs o = _ColumnsBufs()
    cdef Py_ssize_t rows = len(which), m = 0, k, i, nlayouts = len(encoded)
    cdef int32_t name_end = 0, value_end = 0, listed = 0, cnt, end
    cdef char ok
    cdef const int32_t *counts
    for w in which:
        ok = w is not None
        if ok:
            k = w
            if not 0 <= k < nlayouts:
                raise IndexError(f"layout {k} of {nlayouts}")
            lc = <_LayoutColumns>encoded[k]
            for i in range(12):
                buf_put(&o.b[_COPIED[i]], lc.b[_COPIED[i]].data, lc.b[_COPIED[i]].size)
            _put_ends(&o.b[C_NAME_LENS], &lc.b[C_NAME_LENS], lc.n, &name_end)
            _put_ends(&o.b[C_VALUE_LENS], &lc.b[C_VALUE_LENS], lc.nvalues, &value_end)
            counts = <const int32_t *>lc.b[C_VALUE_COUNTS].data
            buf_reserve(&o.value_ends, 4 * lc.n)
            buf_reserve(&o.value_ok, lc.n)
            for k in range(lc.n):
                cnt = counts[k]
                o.value_ok.data[o.value_ok.size + k] = cnt >= 0
                if cnt > 0:
                    if listed > 2147483647 - cnt:  # (empty values take no text: counted apart)
                        raise OverflowError("a batch's columns hold over 2**31 ENUM/SET values")
                    listed += cnt
                (<int32_t *>(o.value_ends.data + o.value_ends.size))[k] = listed
            o.value_ends.size += 4 * lc.n
            o.value_ok.size += lc.n
            m += lc.n
            if m > 2147483647:
                raise OverflowError("a batch's columns hold over 2**31 columns")
        end = <int32_t>m
        buf_put(&o.list_ends, <char *>&end, 4)
        buf_put(&o.list_ok, &ok, 1)
    column = list_type.value_type
    ints = {}
    for i, name in ((C_TYPE, "type"), (C_META, "meta"), (C_COLLATION, "collation")):
        ints[name] = pa.Array.from_buffers(pa.int32(), m, [_validity(&o.b[i + 3], m), _buffer(&o.b[i])])
    bools = {}
    for i, name in ((C_UNSIGNED, "unsigned"), (C_PK, "pk")):
        bools[name] = pa.Array.from_buffers(
            pa.bool_(), m, [_validity(&o.b[i + 1], m), _bitmap(&o.b[i], m)]
        )
    names = pa.Array.from_buffers(pa.string(), m, [None, _buffer(&o.b[C_NAME_LENS]), _buffer(&o.b[C_NAMES])])
    texts = pa.Array.from_buffers(
        pa.string(), listed, [None, _buffer(&o.b[C_VALUE_LENS]), _buffer(&o.b[C_VALUES])]
    )
    values = pa.Array.from_buffers(
        pa.list_(pa.string()), m, [_validity(&o.value_ok, m), _buffer(&o.value_ends)], children=[texts]
    )
    built = {"name": names, "values": values, **ints, **bools}
    struct = pa.StructArray.from_arrays([built[fld.name] for fld in column], fields=list(column))
    return pa.Array.from_buffers(
        list_type, rows, [_validity(&o.list_ok, rows), _buffer(&o.list_ends)], children=[struct]
    )


# ---- the classes the one pass reads (``binlake.txn.TransactionGrouper`` is the grouping's reference) ----

from binlake.events.table_map import TableMap as _TABLE_MAP_CLS
from binlake.events.query import Query as _QUERY_CLS
from binlake.events.control import Xid as _XID_CLS
from binlake import txn as _txn

cdef object _TABLE_MAP = _TABLE_MAP_CLS
cdef object _QUERY = _QUERY_CLS
cdef object _XID = _XID_CLS
cdef frozenset _OWN_RULES = frozenset(int(c) for c in _txn._OWN_RULES)
cdef frozenset _GTID_EVENTS = frozenset(int(c) for c in _txn.GTID_EVENTS)
cdef object _COMMIT = _txn.COMMIT

from binlake.events.gtid import Gtid as _GTID_CLS, MariaGtid as _MARIA_GTID_CLS
import dataclasses as _dataclasses

cdef object _GTID = _GTID_CLS
cdef object _MARIA_GTID = _MARIA_GTID_CLS
cdef Maker _TRANSACTION = Maker(_txn.Transaction)
cdef object _TXN = _txn.Transaction
# a new ``Transaction``'s fields: each one's default, by position (those made per transaction by a
# factory: None here), and the positions ``_start`` sets
cdef tuple _TXN_FIELDS = _dataclasses.fields(_txn.Transaction)
cdef list _TXN_NAMES = [f.name for f in _TXN_FIELDS]
cdef tuple _TXN_DEFAULTS = tuple(None if f.default is _dataclasses.MISSING else f.default for f in _TXN_FIELDS)
cdef Py_ssize_t T_FILE_SEQ = _TXN_NAMES.index("file_seq")
cdef Py_ssize_t T_SOURCE = _TXN_NAMES.index("source")
cdef Py_ssize_t T_START = _TXN_NAMES.index("start")
cdef Py_ssize_t T_SERVER_ID = _TXN_NAMES.index("server_id")
cdef Py_ssize_t T_FIRST_TS = _TXN_NAMES.index("first_header_ts")
cdef Py_ssize_t T_GTID = _TXN_NAMES.index("gtid")
cdef Py_ssize_t T_ANONYMOUS = _TXN_NAMES.index("anonymous")
cdef Py_ssize_t T_LAST_COMMITTED = _TXN_NAMES.index("last_committed")
cdef Py_ssize_t T_SEQUENCE = _TXN_NAMES.index("sequence_number")
cdef Py_ssize_t T_COMMIT_TS = _TXN_NAMES.index("commit_ts_us")
cdef Py_ssize_t T_ORIGINAL_TS = _TXN_NAMES.index("original_commit_ts_us")
cdef Py_ssize_t T_TABLES = _TXN_NAMES.index("tables")
cdef Py_ssize_t T_EVENTS = _TXN_NAMES.index("events")
cdef Py_ssize_t T_BEGAN = _TXN_NAMES.index("began")
cdef Py_ssize_t T_STANDALONE = _TXN_NAMES.index("standalone")
if sorted(
    f.name for f in _TXN_FIELDS if f.default is _dataclasses.MISSING and f.default_factory is _dataclasses.MISSING
) != ["file_seq", "source", "start"] or sorted(
    f.name for f in _TXN_FIELDS if f.default_factory is not _dataclasses.MISSING
) != ["events", "tables"]:
    # (a TypeError, as a stale cimport is: the loader warns and reads pure; the tests' import fails)
    raise TypeError("binlake.txn.Transaction's fields are not the ones Grouper._start makes them from")


cdef inline void set_slot(object o, Py_ssize_t off, object v):
    """Set the slot at ``off`` (``Maker.offset_of``) of ``o``, whose exact class the caller checked."""
    cdef PyObject **p = <PyObject **>(<char *><PyObject *>o + off)
    cdef PyObject *old = p[0]
    Py_INCREF(v)
    p[0] = <PyObject *>v
    Py_XDECREF(old)


from binlake.events.base import Event as _EVENT_CLS, EventHeader as _HEADER_CLS
from binlake.events._fastenv import MAKERS as _MAKERS

cdef object _EVENT = _EVENT_CLS
cdef object _HEADER = _HEADER_CLS
# where the fields ``Grouper`` and ``BatchBuilder.add_transaction`` read and write are in their
# instances (the envelope's ``Maker`` of each class): -1 for each when one of the classes is not of
# the shape ``Maker`` writes directly (``_SLOTS`` off: ``Grouper`` hands every event to the pure
# grouper, ``add_transaction`` every transaction to the change-by-change way)
cdef Py_ssize_t EV_HEADER, EV_BODY, EV_SOURCE, EV_OFFSET, EV_INNER, EV_KIND, H_SIZE, H_SERVER_ID, H_TIMESTAMP
cdef Py_ssize_t R_ROWS, R_COUNTED, R_TABLE, R_UNDECODED, R_OPERATION, R_RAW, R_PARTIAL, R_BEFORE, R_AFTER, R_COUNT
cdef Py_ssize_t Q_QUERY, X_XID, TS_EVENTS, TS_ROWS, TS_TABLES, TS_BEGAN, TS_XID, TS_KIND, TS_END, TS_END_SOURCE
cdef Py_ssize_t TS_COMMIT_HEADER_TS
cdef list _OFFSETS = []


cdef list _offsets(Maker maker, tuple names):
    cdef list got = [maker.offset_of(name) for name in names]
    _OFFSETS.extend(got)
    return got


EV_HEADER, EV_BODY, EV_SOURCE, EV_OFFSET, EV_INNER, EV_KIND = _offsets(
    _MAKERS[_EVENT_CLS], ("header", "body", "source", "offset", "inner_index", "kind")
)
H_SIZE, H_SERVER_ID, H_TIMESTAMP = _offsets(_MAKERS[_HEADER_CLS], ("event_size", "server_id", "timestamp"))
R_ROWS, R_COUNTED, R_TABLE, R_UNDECODED, R_OPERATION, R_RAW, R_PARTIAL, R_BEFORE, R_AFTER, R_COUNT = _offsets(
    _MAKERS[_ROWS_CLS],
    ("rows", "counted", "table", "undecoded_reason", "operation", "raw_rows", "partial", "columns_before",
     "columns_after", "column_count"),
)
Q_QUERY, = _offsets(_MAKERS[_QUERY_CLS], ("query",))
X_XID, = _offsets(_MAKERS[_XID_CLS], ("xid",))
TS_EVENTS, TS_ROWS, TS_TABLES, TS_BEGAN, TS_XID, TS_KIND, TS_END, TS_END_SOURCE, TS_COMMIT_HEADER_TS = _offsets(
    _TRANSACTION, ("events", "rows", "tables", "began", "xid", "kind", "end", "end_source", "commit_header_ts")
)
cdef bint _SLOTS = min(_OFFSETS) >= 0
SLOTS_READ = _SLOTS  # (for the tests: whether the one pass reads the classes' slots, as it should)
# the event kinds the pure grouper has its own rules for, and the GTID events, by type code
cdef bint _OWN[256]
cdef bint _GTID_KIND[256]
for _code in range(256):
    _OWN[_code] = _code in _OWN_RULES
    _GTID_KIND[_code] = _code in _GTID_EVENTS


from binlake.events.types import EventType as _EVENT_TYPE

cdef object _DDL = _txn.DDL
cdef long _PARTIAL = int(_EVENT_TYPE.PARTIAL_UPDATE_ROWS)


cdef bint _any_kind(object events, long kind) except -1:
    """Whether an event of ``events`` (a list) is of ``kind``; an event not exactly an ``Event``
    counts as one (it is not read from its slots)."""
    cdef object ev
    if type(events) is not list:
        return 1
    for ev in <list>events:
        if type(ev) is not _EVENT or slot(ev, EV_KIND) == kind:
            return 1
    return 0


cdef class _TableUse:
    """What the one pass needs of a table map: its layout and encoders, its key's columns (in
    C, ``changes._column_order``) and its names; kept with the map (its id stays its)."""

    cdef object tm, pk_list, layout, db, table
    cdef ObjectPlan img, key
    cdef Py_ssize_t *pk_c
    cdef Py_ssize_t npk
    # the transcoder of the last rows event of the map, and that event's shape
    cdef Transcoder tc
    cdef object tc_op, tc_before, tc_after, tc_count

    cdef Transcoder transcoder(self, object b, object tm):
        """``_transcoder(b, tm)``, kept for the next event of the same shape."""
        # (``b`` is exactly a ``Rows``: ``add_transaction`` checked)
        cdef object op = slot(b, R_OPERATION), before = slot(b, R_BEFORE), after = slot(b, R_AFTER)
        cdef object count = slot(b, R_COUNT)
        if (self.tc is not None and op is self.tc_op and before == self.tc_before and after == self.tc_after
                and count == self.tc_count and not slot(b, R_PARTIAL)):
            return self.tc
        self.tc = _transcoder(b, tm)
        self.tc_op, self.tc_before, self.tc_after, self.tc_count = op, before, after, count
        return self.tc

    def __cinit__(self):
        self.pk_c = NULL

    def __dealloc__(self):
        free(self.pk_c)

    def __init__(self, tm, pk, layout, images):
        cdef Py_ssize_t j
        order = tuple(pk if len(pk) < 2 or pk == sorted(pk) else sorted(pk))
        self.pk_c = <Py_ssize_t *>malloc((len(order) + 1) * sizeof(Py_ssize_t))
        if self.pk_c == NULL:
            raise MemoryError()
        for j in range(len(order)):
            self.pk_c[j] = order[j]
        self.npk = len(order)
        enc = images(layout)
        self.tm, self.pk_list, self.layout, self.img, self.key = tm, pk, layout, enc.image, enc.key
        self.db, self.table = tm.database, tm.table


cdef class Cursor:
    """Where ``BatchBuilder.add_transaction`` goes on in a transaction: the number of the next
    change (``taken``: as ``row_changes`` counts them), and the event, row and byte of its rows'
    bytes that change is at. A batch that fills inside a transaction leaves it there; the next
    batch goes on from it without reading the events before again (a transaction of many rows
    in small batches: linear, not quadratic, in its rows)."""

    cdef public Py_ssize_t taken
    cdef readonly Py_ssize_t event, row, byte


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
    cdef object last_tm, last_pk_list, tm_layout, tm_db, tm_table
    cdef object last_src, last_fname, last_tsrc, last_fno
    cdef _TableUse use  # the last table map's
    cdef dict tables  # id(table map) -> its _TableUse (shared by the builders of one pass)
    cdef Py_ssize_t *pk_c  # the key's columns (``use``'s)
    cdef Py_ssize_t npk

    def __cinit__(self):
        self.pk_c = NULL
        self.npk = 0

    def __init__(self, images, name_images, dict tables=None):
        """``tables``: what ``add_transaction`` found per table map, to share with the next
        builder of the same pass (a new dict when None)."""
        self.images, self.name_images = images, name_images
        self.tables = {} if tables is None else tables
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

    def add_transactions(self, it, source, Cursor at, Py_ssize_t size, layouts, file_number, file_name):
        """``add_transaction`` of each finished transaction of the iterator ``it`` in turn, in one
        call (no Python step per transaction), until one is not taken whole: (that transaction, its
        status as ``add_transaction`` returns it, ``at`` where it stopped), or with status 3, nothing
        of it taken, where it is not for this way: a DDL statement, or with PARTIAL_UPDATE_ROWS
        events (``changes.settle_partial_json`` first); (None, 0) when ``it`` is exhausted."""
        cdef int status
        cdef object t
        for t in it:
            at.event = at.row = at.byte = at.taken = 0  # each transaction from its start
            if not _SLOTS or type(t) is not _TXN or slot(t, TS_KIND) == _DDL or _any_kind(slot(t, TS_EVENTS), _PARTIAL):
                return t, 3
            status = self._add_transaction(t, source, at, size, layouts, file_number, file_name)
            if status:
                return t, status
        return None, 0

    def add_transaction(self, t, source, Cursor at, Py_ssize_t size, layouts, file_number, file_name):
        """The row changes of the finished, non-DDL transaction ``t`` (``changes.row_changes(t,
        None, source)`` is the reference) from where ``at`` is on (a new ``Cursor``: its first
        change), each straight from the rows into the buffers, until the batch holds ``size`` rows.
        ``layouts``, ``file_number``, ``file_name``: the change model's (``changes._layouts`` …).
        Returns the status: 0 every change taken, 1 the batch is full (``at`` is where the next
        batch goes on: no event before it is read again), 2 the change numbered ``at.taken`` is not
        taken (a misfit, or an error the reference may raise; nothing of it is kept): the caller
        adds it and the rest of ``t`` change by change."""
        return self._add_transaction(t, source, at, size, layouts, file_number, file_name)

    cdef int _add_transaction(self, object t, object source, Cursor at, Py_ssize_t size, object layouts,
                              object file_number, object file_name) except -1:
        cdef list events = t.events
        cdef object ev, h, b, tm, rows, pair, op, offset, sid, gtid, lc, seq, ts, tsrc, src, reason
        cdef object fno, tstart
        cdef Py_ssize_t ei, ri, nrows, p
        cdef bint raw
        cdef int status
        cdef uint64_t major = 0, minor = 0
        cdef bint bad_key = 0, update
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
        if not _SLOTS:
            return 2
        for ei in range(at.event, len(events)):
            # the row (and byte of the rows' bytes) of this event to go on from: past the first
            # event, its first
            ri = at.row if ei == at.event else 0
            p = at.byte if ei == at.event else 0
            ev = events[ei]
            if type(ev) is not _EVENT:
                return 2
            h = slot(ev, EV_HEADER)  # (held here: the callbacks below cannot swap it under us)
            if type(h) is not _HEADER:
                return 2
            b = slot(ev, EV_BODY)
            if type(b) is not _ROWS:
                if isinstance(b, _ROWS):
                    return 2
                continue
            tm = slot(b, R_TABLE)
            if tm is None:
                continue
            reason = slot(b, R_UNDECODED)
            raw = reason is not None
            if raw and reason != _NOT_ASKED:  # rows kept undecoded: no change, as ``row_changes``
                continue
            if tm is not self.last_tm or tm.primary_key is not self.last_pk_list:
                try:
                    self._use_table(tm, layouts)
                except Exception:  # the reference's error, raised where it raises it
                    return 2
            op = slot(b, R_OPERATION)
            if op not in _ROW_OPS or ei > 0xFFFFFFFF:
                return 2
            update = op == "update"
            src = slot(ev, EV_SOURCE)
            offset = slot(ev, EV_OFFSET)
            sid = slot(h, H_SERVER_ID)
            if src is not self.last_src:
                self.last_fname = file_name(src)
                self.last_src = src
            try:
                self._use_layout(self.tm_layout)
            except Exception:
                return 2
            put_be(okey + 26, <uint64_t>ei, 4)
            if raw:
                status = self._raw_rows(b, tm, source, size, &at.taken, &ri, &p, fno, offset, tstart, okey, gtid,
                                        lc, seq, ts, sid, op, bad_key)
                if status == 1:
                    at.event, at.row, at.byte = ei, ri, p
                if status != NOT_THIS_WAY:
                    if status:
                        return status
                    continue
                if ri:  # (an event read from its bytes before: not expected)
                    return 2
                # not from its bytes (PARTIAL_UPDATE_ROWS, no compiled decoder, damage): decoded here
                # and taken as decoded rows (damage: the caller's decoding raises its error)
                try:
                    ev = _decoded(ev)
                except Exception:
                    return 2
                events[ei] = ev
                b = ev.body
            rows = b.rows
            nrows = len(rows)
            while ri < nrows:
                if bad_key or ri > 0xFFFFFFFF:
                    return 2
                pair = rows[ri]
                if not PyTuple_CheckExact(pair) or PyTuple_GET_SIZE(pair) != 2:
                    return 2
                if self._row(<object>PyTuple_GET_ITEM(pair, 0), <object>PyTuple_GET_ITEM(pair, 1), update,
                             source, fno, offset, tstart, okey, ri, gtid, lc, seq, ts, sid, op):
                    return 2
                at.taken += 1
                ri += 1
                if self.rows >= size:
                    at.event, at.row, at.byte = ei, ri, 0
                    return 1
        return 0

    cdef int _row(self, object before, object after, bint update, object source, object fno, object offset,
                  object tstart, char *okey, Py_ssize_t ri, object gtid, object lc, object seq, object ts,
                  object sid, object op) except -1:
        """One row change from its images (decoded lists, or ``RawImage``s); 1 when it is not
        taken (nothing of it kept)."""
        cdef bint has_a, has_b
        self._save()
        try:
            has_b = _has_key(self.pk_c, self.npk, before)
            # a minimal after image leaves out a key that did not change: the before image has it
            has_a = _has_key(self.pk_c, self.npk, after)
            self._common(source, fno, offset, tstart, okey, ri, gtid, lc, seq, ts, sid, op)
            if not self.keyed_before and (has_a or has_b) and type(before) is RawImage:
                (<RawImage>before).check()  # left out, but decoded as the reference decodes it
            self.before.put(self.img, before if self.keyed_before or not (has_a or has_b) else None)
            self.after.put(self.img, after)
            self.pk.put(self.key, after if has_a else before if has_b else None, self.pk_c)
            self.pk_before.put(self.key, before if update and has_b else None, self.pk_c)
        except Exception:
            self._restore()
            return 1
        self.which.append(self.last_index)
        self.rows += 1
        return 0

    cdef int _common(self, object source, object fno, object offset, object tstart, char *okey, Py_ssize_t ri,
                     object gtid, object lc, object seq, object ts, object sid, object op) except -1:
        """A row change's fields other than its images and keys."""
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
        return 0

    cdef int _raw_rows(self, object b, object tm, object source, Py_ssize_t size, Py_ssize_t *pn,
                       Py_ssize_t *pri, Py_ssize_t *pp, object fno, object offset, object tstart, char *okey,
                       object gtid, object lc, object seq, object ts, object sid, object op,
                       bint bad_key) except -2:
        """``add_transaction``'s rows of one event read with row decoding off (``b.raw_rows``),
        written from their bytes (``RawImage``) from row ``pri`` at byte ``pp`` on (0, 0: the
        first): its status as there (``pn``: the next change's number; ``pri``, ``pp``: the next
        row and its byte), or NOT_THIS_WAY when this event is not read this way (no compiled
        decoder for it, rows of no columns, PARTIAL_UPDATE_ROWS, damage): the caller decodes it."""
        cdef Transcoder tc = self.use.transcoder(b, tm)
        cdef RawImage rb, ra
        cdef object buf = slot(b, R_RAW)
        cdef const unsigned char *s
        cdef Py_ssize_t p = pp[0], end, ri = pri[0], last = 0, n = pn[0]
        cdef bint update = op == "update"
        if tc is None or type(buf) is not bytes:
            return NOT_THIS_WAY
        s = <const unsigned char *>PyBytes_AS_STRING(buf)
        end = PyBytes_GET_SIZE(buf)
        rb, ra = tc.before, tc.after
        # the whole event walked first, as decoding reads it whole before any row is used: damage
        # is found before a row of it is written (the caller's decoding then raises its error);
        # going on inside an event, the call that wrote its first rows walked it
        if p == 0:
            try:
                tc.decoder.walk(buf, s, end, &last)
            except Exception:
                return NOT_THIS_WAY
            if last != end:
                return NOT_THIS_WAY
        while p < end:
            try:
                if rb is not None:
                    rb.parse(buf, s, end, &p)
                if ra is not None:
                    ra.parse(buf, s, end, &p)
            except Exception:  # (the walk above read the same values: not expected)
                return 2  # rows before it may be taken: the caller goes on change by change
            if bad_key or ri > 0xFFFFFFFF:
                return 2
            if self._row(rb, ra, update, source, fno, offset, tstart, okey, ri, gtid, lc, seq, ts, sid, op):
                return 2
            n += 1
            ri += 1
            pn[0], pri[0], pp[0] = n, ri, p
            if self.rows >= size:
                return 1
        return 0

    cdef int _use_table(self, object tm, object layouts) except -1:
        """The layout, key columns (``changes._column_order``), names and encoders of a table map,
        found once per map (``tables``)."""
        cdef _TableUse u = self.tables.get(id(tm))
        cdef object pk = tm.primary_key
        self.last_tm = None
        if u is None or u.tm is not tm or u.pk_list is not pk:
            u = _TableUse(tm, pk, layouts(tm), self.images)
            if len(self.tables) >= 4096:
                self.tables.clear()
            self.tables[id(tm)] = u
        self.use = u
        self.tm_layout, self.pk_c, self.npk = u.layout, u.pk_c, u.npk
        self.tm_db, self.tm_table = u.db, u.table
        self.last_tm, self.last_pk_list = tm, pk
        return 0

    cdef int _use_layout(self, object layout) except -1:
        cdef object enc, index
        if layout is not self.last_layout:
            if self.use is not None and layout is self.use.layout:
                self.img, self.key = self.use.img, self.use.key
            else:
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


cdef class Grouper:
    """``TransactionGrouper.feed`` with the events of a plain transaction in C: its GTID (none
    open, nothing pending), BEGIN, table maps, rows events and XID, their fields read from their
    slots. Every other event goes to the pure grouper ``g``, whose state this shares (``g.current``
    …, read and written in its ``__dict__``), so its rules stay the one reference. Where the open
    transaction's last event ends (``g._last_end``, ``_last_source``: what the pure grouper gives an
    abandoned transaction) is written when ``g`` is next used, the input ends or ``sync`` is
    called."""

    cdef object g
    cdef dict d
    cdef bint keep
    cdef bint unsynced  # an event was added here since ``_sync``: where the open one ends is its end
    cdef object last_offset, last_size, last_source  # that event's fields, read when it was added (size None: inner)

    def __init__(self, g):
        self.g = g
        self.d = g.__dict__
        self.keep = g.keep_events
        self.unsynced = False
        for name in ("current", "pending", "_payload_size", "_last_end", "_last_source"):
            if name not in self.d:
                raise ValueError("not a TransactionGrouper")

    def feed(self, file_seq, ev):
        """``TransactionGrouper.feed``: the transactions ``ev`` finishes."""
        out = self._feed(file_seq, ev)
        self._sync()
        return out

    def pull(self, it, file_seq):
        """Events from the iterator ``it`` until one finishes a transaction: the transactions it
        finishes (unfinished ones included, as ``feed`` gives them); None when ``it`` is exhausted."""
        cdef list out
        for ev in it:
            out = self._feed(file_seq, ev)
            if out:
                return out
        self._sync()
        return None

    def sync(self):
        """Write ``g``'s end of the open transaction (``fed`` does when it is left)."""
        self._sync()

    cdef int _sync(self) except -1:
        """``g``'s end of the open transaction, from the last event added here."""
        if self.unsynced:
            self.unsynced = False
            self.d["_last_end"] = self.last_offset + (
                self.d["_payload_size"] if self.last_size is None else self.last_size
            )
            self.d["_last_source"] = self.last_source
        return 0

    cdef list _feed(self, object file_seq, object ev):
        cdef object body, cls, t
        cdef long code
        if _SLOTS and type(ev) is _EVENT and type(slot(ev, EV_HEADER)) is _HEADER:
            body = slot(ev, EV_BODY)
            cls = type(body)
            t = self.d["current"]
            code = slot(ev, EV_KIND)
            if not 0 <= code < 256:
                pass
            elif t is not None:
                if _OWN[code] or type(t) is not _TXN:
                    pass
                elif cls is _ROWS or cls is _TABLE_MAP:
                    self._add(t, ev, body, cls)
                    return []
                elif cls is _QUERY and slot(body, Q_QUERY) == "BEGIN":
                    self._add(t, ev, body, cls)
                    set_slot(t, TS_BEGAN, True)  # ``statement_ends``: BEGIN opens, and ends nothing
                    return []
                elif cls is _XID:
                    self._add(t, ev, body, cls)
                    set_slot(t, TS_XID, slot(body, X_XID))
                    return [self._finish(t, ev)]
            elif _GTID_KIND[code] and not self.d["pending"]:  # (the pure grouper's own rule for it)
                t = self._start(file_seq, ev, body, cls)
                self._add(t, ev, body, cls)
                return []
        self._sync()
        return self.g.feed(file_seq, ev)

    cdef object _start(self, object file_seq, object ev, object b, object cls):
        """``TransactionGrouper._start`` then ``_take_gtid`` of a GTID event, nothing pending: the
        new transaction, made current."""
        cdef list v = list(_TXN_DEFAULTS)
        h = slot(ev, EV_HEADER)
        v[T_FILE_SEQ], v[T_SOURCE], v[T_START] = file_seq, slot(ev, EV_SOURCE), slot(ev, EV_OFFSET)
        v[T_SERVER_ID], v[T_FIRST_TS] = slot(h, H_SERVER_ID), slot(h, H_TIMESTAMP)
        v[T_TABLES], v[T_EVENTS] = [], []
        if isinstance(b, _GTID):  # (as ``_take_gtid`` asks)
            v[T_ANONYMOUS] = b.anonymous
            if not v[T_ANONYMOUS]:  # ``Gtid.gtid`` without the property's Python call
                tag = b.tag
                v[T_GTID] = f"{b.sid}:{tag}:{b.gno}" if tag else f"{b.sid}:{b.gno}"
            v[T_LAST_COMMITTED], v[T_SEQUENCE] = b.last_committed, b.sequence_number
            v[T_COMMIT_TS], v[T_ORIGINAL_TS] = b.immediate_commit_timestamp, b.original_commit_timestamp
        elif isinstance(b, _MARIA_GTID):
            v[T_GTID], v[T_STANDALONE] = b.gtid, b.standalone
            v[T_BEGAN] = not v[T_STANDALONE]  # MariaDB writes the GTID event in place of BEGIN
            if b.commit_id is not None:
                v[T_LAST_COMMITTED] = b.commit_id
        t = _TRANSACTION.make(tuple(v))
        self.d["current"] = t
        return t

    cdef int _add(self, object t, object ev, object b, object cls) except -1:
        cdef object key, counted
        cdef list tables
        if self.keep:
            events = slot(t, TS_EVENTS)
            if type(events) is list:
                (<list>events).append(ev)
            else:  # (not a list someone put there: what the pure grouper's ``append`` does with it)
                events.append(ev)
        # (none of the events added here is a TRANSACTION_PAYLOAD, whose size the pure grouper keeps)
        # (its fields now: the event is the consumer's once its transaction is given)
        self.unsynced = True
        self.last_offset, self.last_source = slot(ev, EV_OFFSET), slot(ev, EV_SOURCE)
        self.last_size = None if slot(ev, EV_INNER) is not None else slot(slot(ev, EV_HEADER), H_SIZE)
        if cls is _TABLE_MAP:
            key = (b.database, b.table)
            tables = slot(t, TS_TABLES)
            if key not in tables:
                tables.append(key)
        elif cls is _ROWS:
            counted = slot(b, R_COUNTED)
            set_slot(t, TS_ROWS, slot(t, TS_ROWS) + (len(slot(b, R_ROWS)) if counted is None else counted))
        return 0

    cdef object _finish(self, object t, object ev):
        """``TransactionGrouper._finish(ev, COMMIT)`` of an XID event."""
        set_slot(t, TS_KIND, _COMMIT)
        set_slot(t, TS_END, slot(ev, EV_OFFSET) + (
            self.d["_payload_size"] if slot(ev, EV_INNER) is not None else slot(slot(ev, EV_HEADER), H_SIZE)
        ))
        set_slot(t, TS_END_SOURCE, slot(ev, EV_SOURCE))
        set_slot(t, TS_COMMIT_HEADER_TS, slot(slot(ev, EV_HEADER), H_TIMESTAMP))
        self.d["current"] = None
        return t


def json_doc_text(bytes doc not None):
    """``json_doc``'s text of a binary JSON document (bytes), None where it leaves it to the decoder."""
    cdef Buf b
    memset(&b, 0, sizeof(Buf))
    try:
        if json_doc(&b, <const unsigned char *>PyBytes_AS_STRING(doc), PyBytes_GET_SIZE(doc)):
            return None
        return PyBytes_FromStringAndSize(b.data, b.size)
    finally:
        free(b.data)
