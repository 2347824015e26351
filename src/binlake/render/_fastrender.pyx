# cython: language_level=3, boundscheck=False, wraparound=False
"""Row images as ``mysqlbinlog -vv`` text in C: the optional compiled twin of ``render.rowtext``.

``rowtext`` turns a table layout into one operation per column, held as data (a code, an integer,
an object: a format, an ENUM table), with the column's line prefix, type-comment tail and NULL line,
and a Python function giving the text of any value of the column (``slow``: the generated
expression itself). This module interprets them: the common value classes are formatted here
(integers, UTF-8 and binary strings without control bytes, DATETIME, DATE, TIMESTAMP, YEAR, ENUM
names, a ``%`` or ``format`` of FLOAT/DOUBLE/DECIMAL), everything else goes through ``slow`` for its
column, so the text is the generated formatter's by construction. An image with an ``ABSENT``
column, or of another length, goes to the generated formatter as a whole.
"""

from cpython.datetime cimport (
    PyDate_CheckExact,
    PyDateTime_CheckExact,
    PyDateTime_DATE_GET_HOUR,
    PyDateTime_DATE_GET_MICROSECOND,
    PyDateTime_DATE_GET_MINUTE,
    PyDateTime_DATE_GET_SECOND,
    PyDateTime_GET_DAY,
    PyDateTime_GET_MONTH,
    PyDateTime_GET_YEAR,
    PyDelta_CheckExact,
    timedelta_days,
    timedelta_microseconds,
    timedelta_seconds,
    datetime_tzinfo,
    import_datetime,
)
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyObject_Format, PyObject_Str
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.float cimport PyFloat_AS_DOUBLE
from libc.math cimport isfinite
from libc.stdio cimport snprintf

from binlake.render._bytesout cimport _plain_decimal, _put, _put_bytes, _put_str
from binlake.render._digits cimport bits_text, i64_text, padded, u64_text
from libc.string cimport memcpy

import datetime as _dt
from decimal import Decimal

import_datetime()

# the interface ``rowtext`` expects (a build older than this source is not used)
INTERFACE = 2

cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    int PyUnicode_KIND(object)
    void *PyUnicode_DATA(object)
    Py_UCS4 PyUnicode_READ(int kind, void *data, Py_ssize_t index)
    char *PyBytes_AS_STRING(object)
    char *PyByteArray_AS_STRING(object)
    Py_ssize_t PyByteArray_GET_SIZE(object)
    int PyByteArray_Resize(object, Py_ssize_t) except -1
    bint PyUnicode_IS_ASCII(object)
    bytes PyUnicode_AsEncodedString(object, const char *, const char *)
    Py_ssize_t PyBytes_GET_SIZE(object)
    object PyNumber_Remainder(object, object)

cdef enum:
    OP_SLOW = 0
    OP_UINT = 1
    OP_SINT = 2
    OP_STR = 3
    OP_BYTES = 4
    OP_PCT = 5
    OP_FORMAT = 6
    OP_DATETIME = 7
    OP_DATE = 8
    OP_TIMESTAMP = 9
    OP_YEAR = 10
    OP_ENUM = 11
    OP_BIT = 12
    OP_SET = 13
    OP_JSON = 14
    OP_TIME = 15

# operation names (``rowtext``'s plan) -> codes
OPS = {
    "slow": OP_SLOW,
    "uint": OP_UINT,
    "sint": OP_SINT,
    "str": OP_STR,
    "bytes": OP_BYTES,
    "pct": OP_PCT,
    "format": OP_FORMAT,
    "datetime": OP_DATETIME,
    "date": OP_DATE,
    "timestamp": OP_TIMESTAMP,
    "year": OP_YEAR,
    "enum": OP_ENUM,
    "bit": OP_BIT,
    "set": OP_SET,
    "json": OP_JSON,
    "time": OP_TIME,
}

cdef object UTC = _dt.timezone.utc
cdef str QUOTE = "'"


cdef inline long long _days_from_civil(long long y, long long m, long long d):
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y -= m <= 2
    cdef long long era = (y if y >= 0 else y - 399) // 400
    cdef long long yoe = y - era * 400
    cdef long long doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    cdef long long doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


cdef inline bint _has_control_str(object s):
    cdef int kind = PyUnicode_KIND(s)
    cdef void *data = PyUnicode_DATA(s)
    cdef Py_ssize_t j, n = PyUnicode_GET_LENGTH(s)
    for j in range(n):
        if PyUnicode_READ(kind, data, j) < 0x20:
            return True
    return False


cdef inline bint _has_control_bytes(object b):
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(b)
    cdef Py_ssize_t j, n = PyBytes_GET_SIZE(b)
    for j in range(n):
        if p[j] < 0x20:
            return True
    return False


cdef inline bytes _enc(str s):
    return s.encode("utf-8", "surrogateescape")


cdef int _put_quoted(bytearray out, bytes raw) except -1:
    """``quote_bytes(raw)`` encoded: quoted, control bytes as ``\\xNN``, everything else as stored."""
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t j, run = 0, n = PyBytes_GET_SIZE(raw)
    cdef char esc[8]
    _put(out, "'", 1)
    for j in range(n):
        if p[j] < 0x20:
            _put(out, <const char *>p + run, j - run)
            snprintf(esc, 8, "\\x%02x", p[j])
            _put(out, esc, 4)
            run = j + 1
    _put(out, <const char *>p + run, n - run)
    return _put(out, "'", 1)


cdef int _time(object v, int fsp, char *buf):
    """``format_time`` quoted: ``'[-]HH:MM:SS[.frac]'``, hours beyond 24 (``buf``: 64 bytes)."""
    cdef int k
    cdef long long us = (
        <long long>timedelta_days(v) * 86400000000LL
        + <long long>timedelta_seconds(v) * 1000000LL
        + timedelta_microseconds(v)
    )
    cdef const char *sign = "-" if us < 0 else ""
    if us < 0:
        us = -us
    cdef long long secs = us // 1000000, frac = us % 1000000
    k = snprintf(buf, 64, "'%s%02lld:%02lld:%02lld", sign, secs // 3600, (secs % 3600) // 60, secs % 60)
    if fsp:
        k += snprintf(buf + k, 64 - k, ".%06lld", frac)
        if fsp < 6:
            k -= 6 - fsp
    buf[k] = 39  # '
    return k + 1


cdef inline int _date_text(char *buf, object v, char sep) noexcept:
    """``%04d{sep}%02d{sep}%02d`` of a date's year (1 .. 9999), month and day: 10 bytes."""
    padded(buf, PyDateTime_GET_YEAR(v), 4)
    buf[4] = sep
    padded(buf + 5, PyDateTime_GET_MONTH(v), 2)
    buf[7] = sep
    padded(buf + 8, PyDateTime_GET_DAY(v), 2)
    return 10


cdef inline int _datetime_text(char *buf, object v, char sep, int fsp) noexcept:
    """``%04d-%02d-%02d %02d:%02d:%02d`` (``sep`` between the date's parts) and ``fsp`` (0 .. 6)
    digits of the microseconds after a point."""
    _date_text(buf, v, sep)
    buf[10] = 32
    padded(buf + 11, PyDateTime_DATE_GET_HOUR(v), 2)
    buf[13] = 58
    padded(buf + 14, PyDateTime_DATE_GET_MINUTE(v), 2)
    buf[16] = 58
    padded(buf + 17, PyDateTime_DATE_GET_SECOND(v), 2)
    if fsp <= 0:
        return 19
    buf[19] = 46  # .
    padded(buf + 20, PyDateTime_DATE_GET_MICROSECOND(v), 6)
    return 20 + fsp


cdef int _bit_width(object spec):
    """The width of a ``"0{width}b"`` spec (1 .. 61: the text fits the 64-byte buffer), else 0."""
    if type(spec) is not str or len(spec) < 3 or not spec.startswith("0") or not spec.endswith("b"):
        return 0
    digits = spec[1:-1]
    if not digits.isdigit() or not digits.isascii():
        return 0
    width = int(digits)
    return width if 1 <= width <= 61 else 0


cdef class ImageText:
    """``image_text(image, out)``: appends the ``###`` lines of one row image to ``out``, as the
    generated formatter ``fallback`` does (which takes the images this does not)."""

    cdef Py_ssize_t n
    cdef int *codes
    cdef unsigned long long *args
    cdef tuple auxes, slows, prefixes, tails, nulls, qprefixes, qtails
    cdef tuple bprefixes, btails, bnulls, bqprefixes, bqtails  # encoded, lines with their newline
    cdef object absent, fallback

    def __cinit__(self):
        self.codes = NULL
        self.args = NULL

    def __init__(self, list ops, list prefixes, list tails, list nulls, object absent, object fallback):
        """``ops``: per column ``(code, int, aux, slow)``; ``prefixes``/``tails``: what goes before
        and after a value on its line; ``nulls``: the whole line of a NULL."""
        cdef Py_ssize_t i, n = len(ops)
        if not (len(prefixes) == len(tails) == len(nulls) == n):
            raise ValueError("one prefix, tail and NULL line per column")
        self.n = n
        self.codes = <int *>PyMem_Malloc(max(n, 1) * sizeof(int))
        self.args = <unsigned long long *>PyMem_Malloc(max(n, 1) * sizeof(unsigned long long))
        if self.codes == NULL or self.args == NULL:
            raise MemoryError()
        auxes, slows = [], []
        for i in range(n):
            code, arg, aux, slow = ops[i]
            self.codes[i] = code
            self.args[i] = arg
            if code == OP_PCT:  # the formats C prints itself
                self.args[i] = 1 if aux == "%-20g" else 2 if aux == "%-.20g" else 0
            elif code == OP_FORMAT:  # DECIMAL's "f": 1 (C takes its ``str`` where that is the same)
                self.args[i] = 1 if aux == "f" else 0
            elif code == OP_BIT:  # "0{width}b": the width (0: another spec, ``_pyvalue``)
                self.args[i] = _bit_width(aux)
            auxes.append(aux)
            slows.append(slow)
        self.auxes, self.slows = tuple(auxes), tuple(slows)
        self.prefixes = tuple([str(p) for p in prefixes])
        self.tails = tuple([str(t) for t in tails])
        self.nulls = tuple([str(x) for x in nulls])
        self.qprefixes = tuple([str(p) + QUOTE for p in prefixes])
        self.qtails = tuple([QUOTE + str(t) for t in tails])
        self.absent = absent
        self.fallback = fallback
        try:
            self.bprefixes = tuple([_enc(p) for p in self.prefixes])
            self.btails = tuple([_enc(t + "\n") for t in self.tails])
            self.bnulls = tuple([_enc(x + "\n") for x in self.nulls])
            self.bqprefixes = tuple([_enc(p) for p in self.qprefixes])
            self.bqtails = tuple([_enc(t + "\n") for t in self.qtails])
        except UnicodeEncodeError:  # a name that does not encode: lines only (``rows_bytes`` says False)
            self.bprefixes = None

    def __dealloc__(self):
        PyMem_Free(self.codes)
        PyMem_Free(self.args)

    cdef int _ascii(self, Py_ssize_t i, object v, char *buf) except -2:
        """The text of non-NULL ``v`` in column ``i`` written to ``buf`` (64 bytes) when it is one of
        the value classes formatted here: its length; else -1 (``_pyvalue`` knows it)."""
        cdef int code = self.codes[i]
        cdef long long x
        cdef int overflow = 0
        cdef int k
        if code == OP_UINT:
            if type(v) is int:
                x = PyLong_AsLongLongAndOverflow(v, &overflow)
                if overflow == 0:
                    return i64_text(buf, x)
            return -1
        if code == OP_SINT:
            if type(v) is int:
                x = PyLong_AsLongLongAndOverflow(v, &overflow)
                if overflow == 0 and x >= 0 and <unsigned long long>x < self.args[i]:
                    return i64_text(buf, x)
                if overflow == 0 and x < 0 and <unsigned long long>(-(x + 1)) < self.args[i]:
                    # ``_int_text``: ``-1 (255)``, the value and its unsigned reading (x + 2 ** bits,
                    # modulo 2 ** 64: the limit is 2 ** (bits - 1))
                    k = i64_text(buf, x)
                    buf[k] = 32  # ' ('
                    buf[k + 1] = 40
                    k += 2 + u64_text(buf + k + 2, <unsigned long long>x + 2 * self.args[i])
                    buf[k] = 41  # )
                    return k + 1
            return -1
        if code == OP_DATETIME:
            if PyDateTime_CheckExact(v) and datetime_tzinfo(v) is None:
                buf[0] = 39  # '
                k = 1 + _datetime_text(buf + 1, v, 45, <int>self.args[i])
                buf[k] = 39
                return k + 1
            return -1
        if code == OP_DATE:
            if PyDate_CheckExact(v):
                buf[0] = 39  # '
                k = 1 + _date_text(buf + 1, v, 58)  # YYYY:MM:DD, as mysqlbinlog prints a DATE
                buf[k] = 39
                return k + 1
            return -1
        if code == OP_TIMESTAMP:
            if PyDateTime_CheckExact(v) and datetime_tzinfo(v) is UTC:
                x = (
                    _days_from_civil(PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v)) * 86400
                    + PyDateTime_DATE_GET_HOUR(v) * 3600
                    + PyDateTime_DATE_GET_MINUTE(v) * 60
                    + PyDateTime_DATE_GET_SECOND(v)
                )
                k = i64_text(buf, x)
                if self.args[i]:
                    buf[k] = 46  # .
                    padded(buf + k + 1, PyDateTime_DATE_GET_MICROSECOND(v), 6)
                    k += 1 + <int>self.args[i]
                return k
            return -1
        if code == OP_PCT:
            # FLOAT's ``%-20g`` and DOUBLE's ``%-.20g`` of a finite float: C prints what Python does
            # (both correctly rounded, the same exponent form); other formats and values: ``_pyvalue``
            if type(v) is float and isfinite(PyFloat_AS_DOUBLE(v)):
                if self.args[i] == 1:
                    k = snprintf(buf, 64, "%-20g", PyFloat_AS_DOUBLE(v))
                elif self.args[i] == 2:
                    k = snprintf(buf, 64, "%-.20g", PyFloat_AS_DOUBLE(v))
                else:
                    return -1
                return k if 0 < k < 64 else -1
            return -1
        if code == OP_BIT:
            # ``"b'" + format(v, "0{width}b") + "'"`` of an int 0 <= v < 2 ** 63: its bits, zero-padded
            if type(v) is int and self.args[i]:
                x = PyLong_AsLongLongAndOverflow(v, &overflow)
                if overflow == 0 and 0 <= x < (1LL << 61):
                    return bits_text(buf, <unsigned long long>x, <int>self.args[i])
            return -1
        if code == OP_YEAR:
            if type(v) is int:
                x = PyLong_AsLongLongAndOverflow(v, &overflow)
                if overflow == 0 and 0 <= x <= 9999:
                    return padded(buf, x, 4)
            return -1
        if code == OP_TIME:
            if PyDelta_CheckExact(v) and -100000 < timedelta_days(v) < 100000:
                return _time(v, <int>self.args[i], buf)
            return -1
        return -1

    cdef str _pyvalue(self, Py_ssize_t i, object v):
        """The text of non-NULL ``v`` in column ``i`` that ``_ascii`` does not write."""
        cdef int code = self.codes[i]
        cdef PyObject *hit
        cdef str s
        if code == OP_UINT:
            return PyObject_Str(v)
        if code == OP_PCT:
            return PyNumber_Remainder(self.auxes[i], v)
        if code == OP_FORMAT:
            if self.args[i] and type(v) is Decimal:
                s = PyObject_Str(v)
                if _plain_decimal(s):  # then ``format(v, "f")`` is the same text
                    return s
            return PyObject_Format(v, self.auxes[i])
        if code == OP_ENUM:
            if type(v) is str:
                hit = PyDict_GetItem(self.auxes[i], v)
                return <str>hit if hit != NULL else "0"
            if type(v) is int:
                return PyObject_Str(v)
        elif code == OP_BIT:
            if type(v) is int:
                s = PyObject_Format(v, self.auxes[i])
                return f"b'{s}'"
        elif code == OP_SET:
            if type(v) is tuple:
                hit = PyDict_GetItem(self.auxes[i], v)
                if hit != NULL and <object>hit:
                    return <str>hit
        elif code == OP_JSON:
            if type(v) is self.auxes[i]:
                s = v.text()
                return f"'{s}'"
        return self.slows[i](v)

    cdef object _line(self, Py_ssize_t i, object v):
        cdef int code = self.codes[i]
        cdef str s
        cdef char buf[64]
        cdef int k
        if v is None:
            return self.nulls[i]
        if code == OP_STR:
            if type(v) is str and not _has_control_str(v):
                s = <str>v
                return f"{<str>self.qprefixes[i]}{s}{<str>self.qtails[i]}"
            s = self.slows[i](v)
        elif code == OP_BYTES:
            if type(v) is bytes and not _has_control_bytes(v):
                s = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v), "surrogateescape")
                return f"{<str>self.qprefixes[i]}{s}{<str>self.qtails[i]}"
            s = self.slows[i](v)
        else:
            k = self._ascii(i, v, buf)
            s = buf[:k].decode("ascii") if k >= 0 else self._pyvalue(i, v)
        return f"{<str>self.prefixes[i]}{s}{<str>self.tails[i]}"

    cdef int _put_line(self, Py_ssize_t i, object v, bytearray out) except -1:
        """``_line`` with its newline, as UTF-8 with surrogate escapes, appended to ``out``."""
        cdef int code = self.codes[i]
        cdef bytes raw
        cdef char buf[64]
        cdef int k
        if v is None:
            return _put_bytes(out, self.bnulls[i])
        if code == OP_STR or code == OP_BYTES:
            # the reference is ``quote_bytes(stored_bytes(v))``: the bytes as stored, control bytes
            # as ``\\xNN``; text is stored as UTF-8 with surrogate escapes (``str``), or in its column's
            # codec (``bytes``: ``aux``, None for UTF-8 with surrogate escapes)
            if type(v) is str:
                if code == OP_STR:
                    if not _has_control_str(v):
                        _put_bytes(out, self.bqprefixes[i])
                        _put_str(out, v)
                        return _put_bytes(out, self.bqtails[i])
                    raw = PyUnicode_AsEncodedString(v, "utf-8", "surrogateescape")
                elif self.auxes[i] is None:
                    raw = PyUnicode_AsEncodedString(v, "utf-8", "surrogateescape")
                else:
                    raw = v.encode(self.auxes[i])
                _put_bytes(out, self.bprefixes[i])
                _put_quoted(out, raw)
                return _put_bytes(out, self.btails[i])
            if type(v) is bytes:
                if not _has_control_bytes(v):  # what decoding with surrogate escapes and encoding back gives
                    _put_bytes(out, self.bqprefixes[i])
                    _put_bytes(out, v)
                    return _put_bytes(out, self.bqtails[i])
                _put_bytes(out, self.bprefixes[i])
                _put_quoted(out, v)
                return _put_bytes(out, self.btails[i])
            _put_bytes(out, self.bprefixes[i])
            _put_str(out, self.slows[i](v))
        else:
            _put_bytes(out, self.bprefixes[i])
            k = self._ascii(i, v, buf)
            if k >= 0:
                _put(out, buf, k)
            else:
                _put_str(out, self._pyvalue(i, v))
        return _put_bytes(out, self.btails[i])

    cdef bint _whole(self, object image):
        """Whether ``image`` is a list or tuple of this layout's length without an ABSENT column."""
        cdef Py_ssize_t i, n = self.n
        cdef object absent = self.absent
        if type(image) is list:
            if PyList_GET_SIZE(image) != n:
                return False
            for i in range(n):
                if <object>PyList_GET_ITEM(image, i) is absent:
                    return False
            return True
        if type(image) is tuple:
            if PyTuple_GET_SIZE(image) != n:
                return False
            for i in range(n):
                if <object>PyTuple_GET_ITEM(image, i) is absent:
                    return False
            return True
        return False

    cdef int _put_image(self, object image, bytearray out) except -1:
        cdef Py_ssize_t i
        cdef list lines
        cdef object line
        if not self._whole(image):
            lines = []
            self.fallback(image, lines)
            for line in lines:
                _put_str(out, line)
                _put(out, "\n", 1)
            return 0
        if type(image) is list:
            for i in range(self.n):
                self._put_line(i, <object>PyList_GET_ITEM(image, i), out)
        else:
            for i in range(self.n):
                self._put_line(i, <object>PyTuple_GET_ITEM(image, i), out)
        return 0

    def rows_bytes(self, rows, int which, bytes head, bytes second, bytearray out):
        """``rows``' lines, each with its newline, encoded (UTF-8, surrogate escapes) into ``out``:
        the bytes of the lines ``rows`` gives, written without a ``str`` per line. ``head`` and
        ``second`` are the encoded lines before the images. False (nothing written) when a line
        prefix does not encode."""
        cdef object row
        if self.bprefixes is None:
            return False
        for row in rows:
            before, after = row
            _put_bytes(out, head)
            if which == 0:
                self._put_image(before, out)
            elif which == 1:
                self._put_image(after, out)
            else:
                self._put_image(before, out)
                _put_bytes(out, second)
                self._put_image(after, out)
        return True

    def __call__(self, image, list out):
        cdef Py_ssize_t i, n = self.n
        cdef list lines
        if not self._whole(image):
            return self.fallback(image, out)
        if type(image) is list:
            lines = [self._line(i, <object>PyList_GET_ITEM(image, i)) for i in range(n)]
        else:
            lines = [self._line(i, <object>PyTuple_GET_ITEM(image, i)) for i in range(n)]
        out.extend(lines)

    def rows(self, rows, int which, list head, list second, list out):
        """The lines of every row of a rows event: per row ``head``, then the image ``which``
        (0 before, 1 after), or for an update (``which`` 2) ``head``, the before image,
        ``second``, the after image (``render.text._rows_text``'s loop)."""
        cdef object row
        for row in rows:
            before, after = row
            out.extend(head)
            if which == 0:
                self(before, out)
            elif which == 1:
                self(after, out)
            else:
                self(before, out)
                out.extend(second)
                self(after, out)

