# cython: language_level=3, boundscheck=False, wraparound=False
"""Row images as JSON objects and SQL statements in C: the optional compiled twin of the generated
formatters of ``render.jsonrow`` and ``render.sqlrow``.

Both generated formatters write one concatenation per image: constants (quoted labels, identifiers,
separators) and one expression per value. Their modules turn a layout into that sequence held as
data: per value a constant before it, which image and column it comes from, an operation (a code,
an integer, an object) and ``slow``, the generated expression of the column as a function. This
module interprets the sequence: integers, finite floats, DECIMALs, strings with nothing to
escape, naive or UTC DATETIMEs, DATEs, TIMEs and JSON documents' text are written here, every other
value by ``slow`` for its column, so the text is the generated formatter's by construction. Images
of another length or type, with an ``ABSENT`` column, or with a value of the class ``reject`` in a
JSON column (a partial JSON update, for DELETE and UPDATE) go to the generated function as a whole.

A statement is written as text (``Joined(*images)``) or into a bytearray as UTF-8 with surrogate
escapes (``Joined.into``: no text per value; a plain JSON document is written from its value, JSON-
then SQL-escaped, where ``Json.text()`` would give the C encoder's text). ``SqlBlocks`` writes a
whole transaction of ``sql`` that way and ``EventJson`` a whole line of ``dump --format json``.
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
    datetime_tzinfo,
    import_datetime,
    timedelta_days,
    timedelta_microseconds,
    timedelta_seconds,
)
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.dict cimport PyDict_Next
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_Check
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyObject_Format, PyObject_Repr, PyObject_Str
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.float cimport PyFloat_FromDouble
from libc.math cimport isfinite, isinf
from libc.stdio cimport snprintf
from libc.stdlib cimport strtod
from libc.string cimport memcpy

from binlake.render._bytesout cimport _plain_decimal, _put, _put_bytes, _put_str
from binlake.render._digits cimport bits_text, i64_text, padded

import datetime as _dt

import_datetime()

# the interface ``jsonrow``/``sqlrow`` expect (a build older than this source is not used)
INTERFACE = 4

cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    int PyUnicode_KIND(object)
    void *PyUnicode_DATA(object)
    Py_UCS4 PyUnicode_READ(int kind, void *data, Py_ssize_t index)
    void PyUnicode_WRITE(int kind, void *data, Py_ssize_t index, Py_UCS4 value)
    Py_UCS4 PyUnicode_MAX_CHAR_VALUE(object)
    str PyUnicode_FromStringAndSize(const char *, Py_ssize_t)
    str PyUnicode_Join(object, object)
    object PyUnicode_New(Py_ssize_t, Py_UCS4)
    char *PyBytes_AS_STRING(object)
    Py_ssize_t PyBytes_GET_SIZE(object)
    bint PyUnicode_IS_ASCII(object)
    object PyUnicode_AsEncodedString(object, const char *, const char *)
    char *PyByteArray_AS_STRING(object)
    Py_ssize_t PyByteArray_GET_SIZE(object)
    int PyByteArray_Resize(object, Py_ssize_t) except -1

cdef enum:
    OP_SLOW = 0
    OP_INT = 1  # str() of an int
    OP_FLOAT = 2  # repr() of a float (arg 1: finite ones only)
    OP_DECIMAL = 3  # format(v, "f") of an ``aux`` (Decimal) (arg 1: quoted)
    OP_STR = 4  # a str quoted when it has nothing to escape (arg 1: bytes as a binary literal too)
    OP_DATETIME = 5  # a naive or UTC datetime's text, ``arg`` fractional digits, quoted
    OP_DATE = 6
    OP_TIME = 7  # ``format_time``, ``arg`` fractional digits, quoted
    OP_JSON = 8  # the text of an ``aux`` (Json) document, quoted as OP_STR when nothing to escape
    OP_FLOAT32 = 9  # ``float32_text`` of a float32 value (arg 1: ``repr(float(...))`` of finite ones)
    OP_BIT = 10  # ``"b'" + format(v, "0{arg}b") + "'"`` of an int in 0 .. 2**64 - 1 (SQL)
    OP_SET = 11  # ``Q(",".join(v))`` of a tuple of str (SQL)

OPS = {
    "slow": OP_SLOW,
    "int": OP_INT,
    "float": OP_FLOAT,
    "decimal": OP_DECIMAL,
    "str": OP_STR,
    "datetime": OP_DATETIME,
    "date": OP_DATE,
    "time": OP_TIME,
    "json": OP_JSON,
    "float32": OP_FLOAT32,
    "bit": OP_BIT,
    "set": OP_SET,
}

# dialects: what a string is quoted with and which characters make it take ``slow``
DIALECTS = {"json": 0, "sql": 1}

cdef object UTC = _dt.timezone.utc


cdef inline bint _plain_json(object s):
    """Nothing ``json.encoder.encode_basestring`` would escape: no control character, no ``"`` or ``\\``."""
    cdef int kind = PyUnicode_KIND(s)
    cdef void *data = PyUnicode_DATA(s)
    cdef Py_ssize_t j, n = PyUnicode_GET_LENGTH(s)
    cdef Py_UCS4 c
    for j in range(n):
        c = PyUnicode_READ(kind, data, j)
        if c < 0x20 or c == 34 or c == 92:
            return False
    return True


cdef inline bint _plain_sql(object s):
    """Nothing ``dialects.mysql.quote_str`` would escape: no ``\\``, ``'``, NUL, LF, CR or ^Z."""
    cdef int kind = PyUnicode_KIND(s)
    cdef void *data = PyUnicode_DATA(s)
    cdef Py_ssize_t j, n = PyUnicode_GET_LENGTH(s)
    cdef Py_UCS4 c
    for j in range(n):
        c = PyUnicode_READ(kind, data, j)
        if c == 92 or c == 39 or c == 0 or c == 10 or c == 13 or c == 26:
            return False
    return True


cdef const char *HEX = "0123456789abcdef"
cdef const char *B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


# How a string literal writes each ASCII character: 0 as it is, UNICODE as ``\u00xx``, any other
# value the character written after a backslash. JSON is ``json.encoder.encode_basestring``; SQL is
# ``dialects.mysql.quote_str`` (``\0 \n \r \Z``, backslash and quote escaped).
cdef enum:
    UNICODE = 1
cdef Py_UCS4 JSON_ESCAPES[128]
cdef Py_UCS4 SQL_ESCAPES[128]
for _c in range(128):
    JSON_ESCAPES[_c] = UNICODE if _c < 0x20 else 0
    SQL_ESCAPES[_c] = 0
for _c, _e in ((34, 34), (92, 92), (8, 98), (12, 102), (10, 110), (13, 114), (9, 116)):
    JSON_ESCAPES[_c] = _e
for _c, _e in ((92, 92), (39, 39), (0, 48), (10, 110), (13, 114), (26, 90)):
    SQL_ESCAPES[_c] = _e


cdef str _quoted(object s, const Py_UCS4 *escapes, Py_UCS4 quote):
    """``s`` between ``quote`` characters, each ASCII character as ``escapes`` says."""
    cdef int kind = PyUnicode_KIND(s)
    cdef void *data = PyUnicode_DATA(s)
    cdef Py_ssize_t j, k, n = PyUnicode_GET_LENGTH(s), extra = 0
    cdef Py_UCS4 c, e
    cdef object out
    cdef int okind
    cdef void *odata
    for j in range(n):
        c = PyUnicode_READ(kind, data, j)
        if c < 128 and escapes[c]:
            extra += 5 if escapes[c] == UNICODE else 1
    out = PyUnicode_New(n + extra + 2, PyUnicode_MAX_CHAR_VALUE(s))
    okind = PyUnicode_KIND(out)
    odata = PyUnicode_DATA(out)
    PyUnicode_WRITE(okind, odata, 0, quote)
    k = 1
    for j in range(n):
        c = PyUnicode_READ(kind, data, j)
        e = escapes[c] if c < 128 else 0
        if not e:
            PyUnicode_WRITE(okind, odata, k, c)
            k += 1
        elif e == UNICODE:
            PyUnicode_WRITE(okind, odata, k, 92)
            PyUnicode_WRITE(okind, odata, k + 1, 117)  # u00xx
            PyUnicode_WRITE(okind, odata, k + 2, 48)
            PyUnicode_WRITE(okind, odata, k + 3, 48)
            PyUnicode_WRITE(okind, odata, k + 4, HEX[<unsigned int>c >> 4])
            PyUnicode_WRITE(okind, odata, k + 5, HEX[<unsigned int>c & 15])
            k += 6
        else:
            PyUnicode_WRITE(okind, odata, k, 92)
            PyUnicode_WRITE(okind, odata, k + 1, e)
            k += 2
    PyUnicode_WRITE(okind, odata, k, quote)
    return <str>out


cdef inline str _json_quoted(object s):
    """``json.encoder.encode_basestring(s)``."""
    return _quoted(s, JSON_ESCAPES, 34)


cdef inline str _sql_quoted(object s):
    """``dialects.mysql.quote_str(s)``."""
    return _quoted(s, SQL_ESCAPES, 39)


cdef str _hex_literal(object b):
    """``"X'" + b.hex() + "'"``."""
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(b)
    cdef Py_ssize_t j, n = PyBytes_GET_SIZE(b)
    cdef object out = PyUnicode_New(2 * n + 3, 127)
    cdef char *q = <char *>PyUnicode_DATA(out)
    q[0] = 88  # X
    q[1] = 39  # '
    for j in range(n):
        q[2 + 2 * j] = HEX[p[j] >> 4]
        q[3 + 2 * j] = HEX[p[j] & 15]
    q[2 * n + 2] = 39
    return <str>out


cdef str _base64_object(object b):
    """``'{"base64": "' + base64.b64encode(b).decode() + '"}'``."""
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(b)
    cdef Py_ssize_t j, k, n = PyBytes_GET_SIZE(b)
    cdef Py_ssize_t m = 4 * ((n + 2) // 3)
    cdef const char *head = '{"base64": "'
    cdef object out = PyUnicode_New(m + 14, 127)
    cdef char *q = <char *>PyUnicode_DATA(out)
    cdef unsigned int w
    for k in range(12):
        q[k] = head[k]
    k = 12
    j = 0
    while j + 3 <= n:
        w = (p[j] << 16) | (p[j + 1] << 8) | p[j + 2]
        q[k] = B64[w >> 18]
        q[k + 1] = B64[(w >> 12) & 63]
        q[k + 2] = B64[(w >> 6) & 63]
        q[k + 3] = B64[w & 63]
        j += 3
        k += 4
    if n - j == 1:
        w = p[j] << 16
        q[k] = B64[w >> 18]
        q[k + 1] = B64[(w >> 12) & 63]
        q[k + 2] = 61  # =
        q[k + 3] = 61
        k += 4
    elif n - j == 2:
        w = (p[j] << 16) | (p[j + 1] << 8)
        q[k] = B64[w >> 18]
        q[k + 1] = B64[(w >> 12) & 63]
        q[k + 2] = B64[(w >> 6) & 63]
        q[k + 3] = 61
        k += 4
    q[k] = 34  # "
    q[k + 1] = 125  # }
    return <str>out


cdef int _float32_text(double v, char *buf):
    """``render.values.float32_text(v)`` into ``buf`` (64 bytes) for a finite ``v`` that is a float32
    value: the shortest ``%.6g`` .. ``%.9g`` that reads back as the same float32; its length, or 0
    for what the Python function must do (another value, a text that would not pack: its error)."""
    cdef int digits, k
    cdef double d
    cdef float f
    if not isfinite(v) or <double>(<float>v) != v:
        return 0
    for digits in range(6, 10):
        k = snprintf(buf, 64, "%.*g", digits, v)
        d = strtod(buf, NULL)
        f = <float>d
        if isinf(f):  # ``struct.pack("<f")`` refuses it: the Python function raises
            return 0
        if <double>f == v:
            return k
    return 0  # none read back: ``repr(v)`` there


# ---- text written into a bytearray as UTF-8 with surrogate escapes (what the output writer does) ----

cdef inline int _put_int(bytearray out, object v) except -1:
    """``%d`` / ``str`` of an int (any int class: its value)."""
    cdef int overflow = 0
    cdef char buf[32]
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow:
        return _put_str(out, PyObject_Str(int(v)))
    return _put(out, buf, i64_text(buf, x))


cdef inline int _emit(list out, bytearray bout, object s) except -1:
    """``s`` (text) appended to ``out``, or written into ``bout`` when it is given."""
    if bout is None:
        out.append(s)
        return 0
    if type(s) is not str:
        raise TypeError("a formatter gave something other than text")
    return _put_str(bout, <str>s)


cdef inline int _emit_c(list out, bytearray bout, const char *p, Py_ssize_t n) except -1:
    """ASCII ``p[:n]`` appended to ``out`` as text, or written into ``bout``."""
    if bout is None:
        out.append(PyUnicode_FromStringAndSize(p, n))
        return 0
    return _put(bout, p, n)


cdef bint _all_str(tuple v):
    cdef Py_ssize_t j
    for j in range(PyTuple_GET_SIZE(v)):
        if type(<object>PyTuple_GET_ITEM(v, j)) is not str:
            return False
    return True


cdef int _sql_json_str(bytearray out, str s) except -1:
    """A JSON string as ``json.encoder.encode_basestring`` writes it, then escaped as
    ``quote_str`` escapes (its backslashes doubled, ``'`` escaped; its control characters are
    escaped by JSON already)."""
    cdef int kind = PyUnicode_KIND(s)
    cdef void *data = PyUnicode_DATA(s)
    cdef Py_ssize_t j, n = PyUnicode_GET_LENGTH(s)
    cdef Py_UCS4 c
    cdef str q
    for j in range(n):
        c = PyUnicode_READ(kind, data, j)
        if c < 0x20 or c == 34 or c == 92 or c == 39:
            break
    else:
        _put(out, '"', 1)
        _put_str(out, s)
        return _put(out, '"', 1)
    q = _sql_quoted(_json_quoted(s))
    return _put_str(out, q[1:PyUnicode_GET_LENGTH(q) - 1])


cdef bint _float_as_mysql(str r):
    """``repr`` of a finite float that ``json_binary.double_text`` writes the same: no exponent,
    fewer than 16 digits before the point (``Json.text``'s check, ``_REPR_MAY_DIFFER``)."""
    cdef Py_ssize_t j, n = PyUnicode_GET_LENGTH(r), digits = 0
    cdef const char *p
    if not PyUnicode_IS_ASCII(r):
        return False
    p = <const char *>PyUnicode_DATA(r)
    for j in range(n):
        if p[j] == 101:  # e
            return False
        if 48 <= p[j] <= 57:
            digits += 1
        elif p[j] == 46 and digits >= 16:
            return False
        else:
            digits = 0
    return True


cdef bint _sql_json(bytearray out, object x, int depth) except -1:
    """``Json.text()`` of a plain document's value, SQL-escaped into ``out`` (as ``quote_str`` of
    the text, without its quotes): None, bools, ints, finite floats whose ``repr`` MySQL writes
    alike, str, and dicts with str keys and lists of those; False (``out`` part written: the
    caller cuts it) for anything else, which ``Json.text()`` writes."""
    cdef Py_ssize_t pos = 0, j
    cdef PyObject *k
    cdef PyObject *v
    cdef bint first = True
    cdef str r
    if depth > 64:
        return False
    if x is None:
        _put(out, "null", 4)
    elif type(x) is bool:
        _put(out, "true", 4) if x else _put(out, "false", 5)
    elif type(x) is int:
        _put_int(out, x)
    elif type(x) is str:
        _sql_json_str(out, <str>x)
    elif type(x) is float:
        if not isfinite(PyFloat_AS_DOUBLE(x)):
            return False
        r = PyObject_Repr(x)
        if not _float_as_mysql(r):
            return False
        _put_str(out, r)
    elif type(x) is dict:
        _put(out, "{", 1)
        while PyDict_Next(<dict>x, &pos, &k, &v):
            if type(<object>k) is not str:
                return False
            if not first:
                _put(out, ", ", 2)
            first = False
            _sql_json_str(out, <str>k)
            _put(out, ": ", 2)
            if not _sql_json(out, <object>v, depth + 1):
                return False
        _put(out, "}", 1)
    elif type(x) is list:
        _put(out, "[", 1)
        for j in range(PyList_GET_SIZE(x)):
            if j:
                _put(out, ", ", 2)
            if not _sql_json(out, <object>PyList_GET_ITEM(x, j), depth + 1):
                return False
        _put(out, "]", 1)
    else:
        return False
    return True


cdef class Joined:
    """``formatter(*images)``: the text the generated function ``fallback`` returns for them."""

    cdef Py_ssize_t n, width, nimages
    cdef int *codes
    cdef int *args
    cdef int *images
    cdef int *columns
    cdef int dialect
    cdef tuple befores, auxes, slows
    cdef str tail, null, quote
    cdef tuple bbefores  # ``befores`` encoded (None: one does not encode, ``into`` never writes)
    cdef bytes btail, bnull
    cdef char qc
    cdef object absent, reject, fallback
    cdef tuple reject_columns

    def __cinit__(self):
        self.codes = self.args = self.images = self.columns = NULL

    def __init__(
        self, list slots, str tail, int width, int nimages, str dialect, object absent, object reject,
        tuple reject_columns, object fallback,
    ):
        """``slots``: per value ``(before, image, column, code, arg, aux, slow)``; ``tail`` ends the
        text; ``width`` is the length of every image; ``reject`` a value class (or None) that sends
        an image with it in one of ``reject_columns`` to ``fallback``."""
        cdef Py_ssize_t i, n = len(slots)
        self.n, self.width, self.nimages = n, width, nimages
        if not 1 <= nimages <= 2:
            raise ValueError("one or two images")
        self.dialect = DIALECTS[dialect]
        self.null = "null" if self.dialect == 0 else "NULL"
        self.quote = '"' if self.dialect == 0 else "'"
        self.qc = 34 if self.dialect == 0 else 39
        self.bnull = self.null.encode()
        self.codes = <int *>PyMem_Malloc(max(n, 1) * sizeof(int))
        self.args = <int *>PyMem_Malloc(max(n, 1) * sizeof(int))
        self.images = <int *>PyMem_Malloc(max(n, 1) * sizeof(int))
        self.columns = <int *>PyMem_Malloc(max(n, 1) * sizeof(int))
        if self.codes == NULL or self.args == NULL or self.images == NULL or self.columns == NULL:
            raise MemoryError()
        befores, auxes, slows = [], [], []
        for i in range(n):
            before, image, column, code, arg, aux, slow = slots[i]
            if not (0 <= image < nimages and 0 <= column < width):
                raise ValueError("a slot outside the images")
            befores.append(str(before))
            self.images[i], self.columns[i], self.codes[i], self.args[i] = image, column, code, arg
            auxes.append(aux)
            slows.append(slow)
        self.befores, self.auxes, self.slows = tuple(befores), tuple(auxes), tuple(slows)
        self.tail = tail
        try:
            self.bbefores = tuple(b.encode("utf-8", "surrogateescape") for b in self.befores)
            self.btail = tail.encode("utf-8", "surrogateescape")
        except UnicodeError:
            self.bbefores = None
        self.absent, self.reject, self.fallback = absent, reject, fallback
        for column in reject_columns:
            if not 0 <= column < width:
                raise ValueError("a column outside the images")
        self.reject_columns = reject_columns

    def __dealloc__(self):
        PyMem_Free(self.codes)
        PyMem_Free(self.args)
        PyMem_Free(self.images)
        PyMem_Free(self.columns)

    cdef bint _whole(self, object image):
        """A list or tuple of ``width`` values, none ABSENT, no ``reject`` in a ``reject_columns``."""
        cdef Py_ssize_t i
        cdef object v, column
        if type(image) is list:
            if PyList_GET_SIZE(image) != self.width:
                return False
        elif type(image) is tuple:
            if PyTuple_GET_SIZE(image) != self.width:
                return False
        else:
            return False
        for i in range(self.width):
            v = <object>PyList_GET_ITEM(image, i) if type(image) is list else <object>PyTuple_GET_ITEM(image, i)
            if v is self.absent:
                return False
        if self.reject is not None:
            for column in self.reject_columns:
                v = image[column]
                if type(v) is self.reject:
                    return False
        return True

    cdef bint _plain(self, object s):
        return _plain_json(s) if self.dialect == 0 else _plain_sql(s)

    cdef inline int _quoted(self, list out, bytearray bout, object t) except -1:
        """The text ``t`` (nothing to escape) between the dialect's quotes."""
        if bout is None:
            out.append(self.quote)
            out.append(t)
            out.append(self.quote)
            return 0
        _put(bout, &self.qc, 1)
        _put_str(bout, <str>t)
        return _put(bout, &self.qc, 1)

    cdef inline int _quoted_c(self, list out, bytearray bout, const char *p, Py_ssize_t n) except -1:
        """ASCII ``p[:n]`` between the dialect's quotes."""
        if bout is None:
            out.append(self.quote)
            out.append(PyUnicode_FromStringAndSize(p, n))
            out.append(self.quote)
            return 0
        _put(bout, &self.qc, 1)
        _put(bout, p, n)
        return _put(bout, &self.qc, 1)

    cdef int _value(self, Py_ssize_t i, object v, list out, bytearray bout) except -1:
        """Appends the text of ``v`` (not None) in slot ``i`` to ``out``, or writes it into ``bout``
        when given: here, or by ``slow``."""
        cdef int code = self.codes[i]
        cdef long long x
        cdef int overflow = 0
        cdef int k
        cdef char buf[64]
        cdef long long us, secs
        cdef const char *sign
        cdef object t
        cdef Py_ssize_t mark
        cdef unsigned long long ux
        cdef char bits[72]  # b'...' of up to 64 bits
        if code == OP_INT:
            if type(v) is int:
                x = PyLong_AsLongLongAndOverflow(v, &overflow)
                if overflow == 0:
                    k = i64_text(buf, x)
                    _emit_c(out, bout, buf, k)
                else:
                    _emit(out, bout, PyObject_Str(v))
                return 0
        elif code == OP_FLOAT:
            if type(v) is float and (self.args[i] == 0 or isfinite(PyFloat_AS_DOUBLE(v))):
                _emit(out, bout, PyObject_Repr(v))
                return 0
        elif code == OP_DECIMAL:
            if type(v) is self.auxes[i]:
                t = PyObject_Str(v)
                if not _plain_decimal(t):  # ``str`` in plain notation is ``format(v, "f")``
                    t = PyObject_Format(v, "f")
                if self.args[i]:
                    self._quoted(out, bout, t)
                else:
                    _emit(out, bout, t)
                return 0
        elif code == OP_SET:
            if type(v) is tuple and _all_str(<tuple>v):
                t = PyUnicode_Join(",", v)
                if self._plain(t):
                    self._quoted(out, bout, t)
                else:
                    _emit(out, bout, _json_quoted(t) if self.dialect == 0 else _sql_quoted(t))
                return 0
        elif code == OP_STR or code == OP_JSON:
            if code == OP_JSON and bout is not None and self.dialect == 1 and type(v) is self.auxes[i]:
                if v.plain is True:  # ``Q(v.text())`` written here (else: as below)
                    mark = PyByteArray_GET_SIZE(bout)
                    _put(bout, "'", 1)
                    if _sql_json(bout, v.value, 0):
                        return _put(bout, "'", 1)
                    PyByteArray_Resize(bout, mark)
            t = v if code == OP_STR else None
            if code == OP_JSON and type(v) is self.auxes[i]:
                t = v.text()
            if type(t) is str and self._plain(t):
                self._quoted(out, bout, t)
                return 0
            if type(t) is str:  # ``Q(t)``: the dialect's escapes in C
                _emit(out, bout, _json_quoted(t) if self.dialect == 0 else _sql_quoted(t))
                return 0
            if code == OP_STR and self.args[i] and type(v) is bytes:
                _emit(out, bout, _base64_object(v) if self.dialect == 0 else _hex_literal(v))
                return 0
        elif code == OP_BIT:
            if type(v) is int and 1 <= self.args[i] <= 64:
                try:
                    ux = v  # 0 .. 2**64 - 1 (BIT(64) too); else the generated expression
                except OverflowError:
                    pass
                else:
                    _emit_c(out, bout, bits, bits_text(bits, ux, self.args[i]))
                    return 0
        elif code == OP_FLOAT32:
            if type(v) is float:
                k = _float32_text(PyFloat_AS_DOUBLE(v), buf)
                if k > 0:
                    if self.args[i]:
                        _emit(out, bout, PyObject_Repr(PyFloat_FromDouble(strtod(buf, NULL))))
                    else:
                        _emit_c(out, bout, buf, k)
                    return 0
        elif code == OP_DATETIME:
            if PyDateTime_CheckExact(v) and (datetime_tzinfo(v) is None or datetime_tzinfo(v) is UTC):
                padded(buf, PyDateTime_GET_YEAR(v), 4)
                buf[4] = 45  # -
                padded(buf + 5, PyDateTime_GET_MONTH(v), 2)
                buf[7] = 45
                padded(buf + 8, PyDateTime_GET_DAY(v), 2)
                buf[10] = 32
                padded(buf + 11, PyDateTime_DATE_GET_HOUR(v), 2)
                buf[13] = 58  # :
                padded(buf + 14, PyDateTime_DATE_GET_MINUTE(v), 2)
                buf[16] = 58
                padded(buf + 17, PyDateTime_DATE_GET_SECOND(v), 2)
                k = 19
                if self.args[i]:
                    buf[19] = 46  # .
                    padded(buf + 20, PyDateTime_DATE_GET_MICROSECOND(v), 6)
                    k = 20 + self.args[i]
                self._quoted_c(out, bout, buf, k)
                return 0
        elif code == OP_DATE:
            if PyDate_CheckExact(v):
                padded(buf, PyDateTime_GET_YEAR(v), 4)
                buf[4] = 45  # -
                padded(buf + 5, PyDateTime_GET_MONTH(v), 2)
                buf[7] = 45
                padded(buf + 8, PyDateTime_GET_DAY(v), 2)
                k = 10
                self._quoted_c(out, bout, buf, k)
                return 0
        elif code == OP_TIME:
            if PyDelta_CheckExact(v) and -100000 < timedelta_days(v) < 100000:
                us = (
                    <long long>timedelta_days(v) * 86400000000LL
                    + <long long>timedelta_seconds(v) * 1000000LL
                    + timedelta_microseconds(v)
                )
                sign = "-" if us < 0 else ""  # a C string literal
                if us < 0:
                    us = -us
                secs = us // 1000000
                k = snprintf(
                    buf, 64, "%s%02lld:%02lld:%02lld", <const char *>sign, secs // 3600, (secs % 3600) // 60, secs % 60
                )
                if self.args[i]:
                    k += snprintf(buf + k, 64 - k, ".%06lld", us % 1000000)
                    k -= 6 - self.args[i]
                self._quoted_c(out, bout, buf, k)
                return 0
        _emit(out, bout, self.slows[i](v))
        return 0

    cdef inline object _at(self, tuple images, Py_ssize_t i):
        cdef object image = images[self.images[i]]
        return (
            <object>PyList_GET_ITEM(image, self.columns[i])
            if type(image) is list
            else <object>PyTuple_GET_ITEM(image, self.columns[i])
        )

    cdef bint _takes(self, tuple images) except -1:
        cdef object image
        if PyTuple_GET_SIZE(images) != self.nimages:
            return False
        for image in images:
            if not self._whole(image):
                return False
        return True

    def __call__(self, *images):
        cdef Py_ssize_t i
        cdef list out
        cdef object v
        if not self._takes(images):
            return self.fallback(*images)
        out = []
        for i in range(self.n):
            out.append(self.befores[i])
            v = self._at(images, i)
            if v is None:
                out.append(self.null)
            else:
                self._value(i, v, out, None)
        out.append(self.tail)
        return PyUnicode_Join("", out)

    def write(self, bytearray out, *images):
        """Appends ``self(*images)`` encoded (UTF-8, surrogate escapes) to ``out`` as ``SqlBlocks``
        writes it (``into``); on an error ``out`` is as it was."""
        cdef Py_ssize_t start = PyByteArray_GET_SIZE(out)
        try:
            self.into(out, images)
        except BaseException:
            PyByteArray_Resize(out, start)
            raise

    cdef int into(self, bytearray bout, tuple images) except -1:
        """Writes ``self(*images)`` into ``bout`` (UTF-8, surrogate escapes); the generated
        function's text (encoded here) for images it does not take."""
        cdef Py_ssize_t i
        cdef object v
        if self.bbefores is None or not self._takes(images):
            return _emit(None, bout, self.fallback(*images))
        for i in range(self.n):
            _put_bytes(bout, <bytes>PyTuple_GET_ITEM(self.bbefores, i))
            v = self._at(images, i)
            if v is None:
                _put_bytes(bout, self.bnull)
            else:
                self._value(i, v, None, bout)
        return _put_bytes(bout, self.btail)


# ---- whole JSON event lines (``render.jsonl.JsonLines.line``), written as UTF-8 into a bytearray ----

cdef bint _plain_dict(dict d, int depth):
    """What ``jsonl._already_plain`` accepts and this writes as ``encode`` does: string keys; values
    exactly int, str, bool, None, finite float or such a dict (not too deep)."""
    cdef Py_ssize_t pos = 0
    cdef PyObject *k
    cdef PyObject *v
    cdef object val
    if depth > 32:
        return False
    while PyDict_Next(d, &pos, &k, &v):
        if type(<object>k) is not str:
            return False
        val = <object>v
        if type(val) is int or type(val) is str or type(val) is bool or val is None:
            continue
        if type(val) is float and isfinite(PyFloat_AS_DOUBLE(val)):
            continue
        if type(val) is dict and _plain_dict(<dict>val, depth + 1):
            continue
        return False
    return True


cdef int _put_json_str(bytearray out, str s, object quote) except -1:
    """``quote(s)`` (``json.encoder.encode_basestring``): here when nothing is to be escaped."""
    if _plain_json(s):
        _put(out, '"', 1)
        _put_str(out, s)
        return _put(out, '"', 1)
    return _put_str(out, _json_quoted(s))


cdef int _put_dict(bytearray out, dict d, object quote) except -1:
    """``encode(d)`` of a dict ``_plain_dict`` accepted: ``{"k": v, ...}``."""
    cdef Py_ssize_t pos = 0
    cdef PyObject *k
    cdef PyObject *v
    cdef object val
    cdef bint first = True
    _put(out, "{", 1)
    while PyDict_Next(d, &pos, &k, &v):
        if not first:
            _put(out, ", ", 2)
        first = False
        _put_json_str(out, <str>k, quote)
        _put(out, ": ", 2)
        val = <object>v
        if type(val) is int:
            _put_int(out, val)
        elif type(val) is str:
            _put_json_str(out, <str>val, quote)
        elif type(val) is bool:
            _put(out, "true", 4) if val else _put(out, "false", 5)
        elif val is None:
            _put(out, "null", 4)
        elif type(val) is float:
            _put_str(out, PyObject_Repr(val))
        else:
            _put_dict(out, <dict>val, quote)
    return _put(out, "}", 1)


cdef bint _checksum(bytearray out, object x) except -1:
    """``', "checksum": "0x%08x"' % x`` for an int in 0 .. 2**63 - 1 (False: not written)."""
    cdef int overflow = 0
    cdef char buf[48]
    cdef long long c
    if not PyLong_Check(x):
        return False
    c = PyLong_AsLongLongAndOverflow(x, &overflow)
    if overflow or c < 0:
        return False
    _put(out, buf, snprintf(buf, 48, ', "checksum": "0x%08llx"', c))
    return True


cdef class EventJson:
    """``write(ev, out)``: appends ``JsonLines.line(ev)`` and a newline to ``out`` as UTF-8 with
    surrogate escapes — the header and the bodies of plain dataclasses (GTID, QUERY, XID …) here,
    rows and table-map bodies by the pure ``JsonLines``' methods, anything else (a header field
    that is not an int in range, a class ``plan`` gives no field names for, an error) by the
    pure ``line`` itself, so the bytes (or the error) are the pure path's by construction."""

    cdef object line, rows_json, map_json, other_json, plan, quote, rows_cls, map_cls, rows_plan
    cdef dict sources, types, plans, maps

    def __init__(self, line, rows_cls, rows_json, rows_plan, map_cls, map_json, other_json, plan, quote):
        """``line(ev)``: the pure line; ``rows_json(body)``/``map_json(body)``: the bodies of those
        classes; ``rows_plan(table_map)``: ``(table_map, its image formatter, the encoded name
        fields of a rows body, its own body encoded)``; ``other_json(ev)``: the body of any other event as the pure line writes it;
        ``plan(cls)``: per field of a body class its ``(attribute, encoded text before it)`` and the
        text before ``gtid`` — or None for ``other_json``; ``quote``: JSON's string quoting."""
        self.line, self.rows_json, self.map_json, self.other_json = line, rows_json, map_json, other_json
        self.plan, self.quote, self.rows_cls, self.map_cls = plan, quote, rows_cls, map_cls
        self.rows_plan = rows_plan
        self.sources, self.types, self.plans, self.maps = {}, {}, {}, {}

    cdef object _entry(self, object tm):
        """``rows_plan(tm)``, kept by the map's id (with the map: its id stays its own)."""
        entry = self.maps.get(id(tm))
        if entry is None or (<tuple>entry)[0] is not tm:
            if len(self.maps) >= 4096:
                self.maps.clear()
            entry = self.maps[id(tm)] = self.rows_plan(tm)
        return entry

    cdef bint _rows(self, bytearray out, object b) except -1:
        """``JsonLines._rows``: the images by the layout's formatter, the rest here."""
        cdef object tm = b.table
        cdef object entry, image, op, row, before, after, x
        cdef bint first = True
        cdef int which
        if tm is None or b.undecoded_reason or b.partition_id is not None:
            _put_str(out, self.rows_json(b))
            return True
        entry = self._entry(tm)
        image = (<tuple>entry)[1]
        op = b.operation
        if type(op) is not str:
            raise TypeError("an operation that is not text")  # the pure line says what happens
        which = 0 if op == "insert" else 1 if op == "delete" else 2
        _put(out, '{"operation": ', 14)
        _put_json_str(out, <str>op, self.quote)
        for name, x in ((', "table_id": ', b.table_id), (', "flags": ', b.flags),
                        (', "version": ', b.version), (', "column_count": ', b.column_count)):
            if not PyLong_Check(x):
                raise TypeError("a field that is not an int")
            _put_str(out, name)
            _put_int(out, x)
        _put_bytes(out, (<tuple>entry)[2])
        _put(out, ', "rows": [', 11)
        for row in b.rows:
            before, after = row
            if not first:
                _put(out, ", ", 2)
            first = False
            if which == 0:
                _put(out, '{"before": null, "after": ', 26)
                _put_str(out, image(after))
            elif which == 1:
                _put(out, '{"before": ', 11)
                _put_str(out, image(before))
                _put(out, ', "after": null', 15)
            else:
                _put(out, '{"before": ', 11)
                if before is None:
                    _put(out, "null", 4)
                else:
                    _put_str(out, image(before))
                _put(out, ', "after": ', 11)
                if after is None:
                    _put(out, "null", 4)
                else:
                    _put_str(out, image(after))
            _put(out, "}", 1)
        return _put(out, "]}", 2) == 0

    cdef int _field(self, bytearray out, object x, object other, bint empties=True) except -1:
        """``_FIELD_EXPR``: ints, strings and None here (booleans and plain dicts too, as ``other``
        writes them; with ``empties``, empty bytes and tuples as ``_field_json`` writes them),
        anything else by ``other`` (``_field_json``, or ``encode`` for ``gtid``)."""
        if type(x) is int:
            return _put_int(out, x)
        if type(x) is str:
            return _put_json_str(out, <str>x, self.quote)
        if x is None:
            return _put(out, "null", 4)
        if type(x) is bool:
            return _put(out, "true", 4) if x else _put(out, "false", 5)
        if type(x) is dict and _plain_dict(<dict>x, 0):
            return _put_dict(out, <dict>x, self.quote)
        if empties and type(x) is bytes and PyBytes_GET_SIZE(x) == 0:
            return _put(out, '{"base64": ""}', 14)
        if empties and type(x) is tuple and PyTuple_GET_SIZE(x) == 0:
            return _put(out, "[]", 2)
        return _put_str(out, other(x))

    cdef bint _body(self, bytearray out, object ev, object b, object field_json, object encode) except -1:
        cdef object cls = type(b)
        cdef object plan, g
        cdef tuple fields
        cdef Py_ssize_t i
        if cls is self.rows_cls:
            return self._rows(out, b)
        if cls is self.map_cls:
            _put_bytes(out, (<tuple>self._entry(b))[3])
            return True
        plan = self.plans.get(cls, False)
        if plan is False:
            plan = self.plans[cls] = self.plan(cls)
        if plan is None:
            _put_str(out, self.other_json(ev))
            return True
        fields = <tuple>plan[0]
        if not fields:
            _put(out, "{", 1)
        for i in range(len(fields)):
            attr, before = <tuple>fields[i]
            _put_bytes(out, before)
            self._field(out, getattr(b, attr), field_json)
        try:
            g = b.gtid
        except AttributeError:  # ``hasattr(b, "gtid")``
            pass
        else:
            _put_bytes(out, plan[1])
            self._field(out, g, encode, False)
        return _put(out, "}", 1) == 0

    cdef int _event(self, object ev, bytearray out, object field_json, object encode) except -1:
        cdef object h = ev.header
        cdef object source = ev.source
        cdef object kind = ev.kind
        cdef object x, q
        for x in (ev.offset, kind, h.timestamp, h.server_id, h.event_size, h.log_pos, h.flags):
            if not PyLong_Check(x):
                return 0
        q = self.sources.get(source)
        if q is None:
            if type(source) is not str:
                return 0
            if len(self.sources) >= 4096:
                self.sources.clear()
            q = self.sources[source] = PyUnicode_AsEncodedString(self.quote(source), "utf-8", "surrogateescape")
        _put(out, '{"file": ', 9)
        _put_bytes(out, q)
        _put(out, ', "offset": ', 12)
        _put_int(out, ev.offset)
        q = self.types.get(kind)
        if q is None:
            q = self.types[kind] = PyUnicode_AsEncodedString(self.quote(ev.type_name), "utf-8", "surrogateescape")
        _put(out, ', "type": ', 10)
        _put_bytes(out, q)
        _put(out, ', "type_code": ', 15)
        _put_int(out, kind)
        _put(out, ', "timestamp": ', 15)
        _put_int(out, h.timestamp)
        _put(out, ', "server_id": ', 15)
        _put_int(out, h.server_id)
        _put(out, ', "event_size": ', 16)
        _put_int(out, h.event_size)
        _put(out, ', "log_pos": ', 13)
        _put_int(out, h.log_pos)
        _put(out, ', "flags": ', 11)
        _put_int(out, h.flags)
        x = ev.inner_index
        if x is not None:
            if not PyLong_Check(x):
                return 0
            _put(out, ', "inner_index": ', 17)
            _put_int(out, x)
        x = ev.checksum
        if x is not None:
            if not _checksum(out, x):
                return 0
        _put(out, ', "body": ', 10)
        self._body(out, ev, ev.body, field_json, encode)
        _put(out, "}\n", 2)
        return 1

    def write(self, ev, bytearray out, field_json, encode):
        """Appends the line of ``ev`` and a newline to ``out`` (``field_json``, ``encode``: the pure
        encoders of a field value and of ``gtid``)."""
        cdef Py_ssize_t start = PyByteArray_GET_SIZE(out)
        cdef int done = 0
        try:
            done = self._event(ev, out, field_json, encode)
        except Exception:
            done = 0
        if not done:  # the pure line: its text, or its error
            PyByteArray_Resize(out, start)
            _put_str(out, self.line(ev))
            _put(out, "\n", 1)



# ---- a transaction's redo or flashback SQL (``render.sql._block``), written as UTF-8 into a bytearray ----

cdef class SqlBlocks:
    """``write(t, out, flashback)``: appends the lines of ``render.sql._block`` for a transaction
    that is not DDL — its header, ``BEGIN;``, a statement per row change of its rows events (in
    order, or newest first with INSERT and DELETE swapped and UPDATE's images swapped), ``COMMIT;``,
    each with its newline; nothing without a statement — with the statements written into ``out``
    by the layout's compiled formatter (``Joined.into``), or encoded from the text of any other
    formatter. A DDL transaction or odd fields: False, and the caller writes the block (an error:
    ``out`` as it was, and the caller's pure block says what happens), so the bytes (or the error)
    are the pure path's by construction."""

    cdef object rows_cls, row_sql, ddl
    cdef dict maps

    def __init__(self, rows_cls, row_sql, ddl):
        """``rows_cls``: the rows body class; ``row_sql(table_map)``: the layout's ``RowSql``;
        ``ddl``: the kind of a DDL transaction."""
        self.rows_cls, self.row_sql, self.ddl = rows_cls, row_sql, ddl
        self.maps = {}

    cdef object _fns(self, object tm):
        """``row_sql(tm)``, kept by the map's id (with the map: its id stays its own)."""
        entry = self.maps.get(id(tm))
        if entry is None or (<tuple>entry)[0] is not tm:
            if len(self.maps) >= 4096:
                self.maps.clear()
            entry = self.maps[id(tm)] = (tm, self.row_sql(tm))
        return (<tuple>entry)[1]

    cdef inline int _one(self, bytearray out, object make, tuple images) except -1:
        if type(make) is Joined:
            (<Joined>make).into(out, images)
        else:
            _emit(None, out, make(*images))
        return _put(out, "\n", 1)

    cdef bint _rows(self, bytearray out, object b, bint flashback) except -1:
        """The statements of one rows event; False when it has none."""
        cdef object fns = self._fns(b.table)
        cdef object op = b.operation
        cdef object rows = b.rows
        cdef object make, row, before, after
        cdef int which
        cdef bint wrote = False
        if op == "insert":
            make, which = (fns.delete if flashback else fns.insert), 1
        elif op == "delete":
            make, which = (fns.insert if flashback else fns.delete), 0
        else:
            make, which = fns.update, 2
        for row in (reversed(rows) if flashback else rows):
            before, after = row
            if which == 1:
                self._one(out, make, (after,))
            elif which == 0:
                self._one(out, make, (before,))
            elif flashback:  # a partial-JSON edit is undone too: the before image holds the whole document
                self._one(out, make, (after, before))
            else:
                self._one(out, make, (before, after))
            wrote = True
        return wrote

    cdef bint _block(self, object t, bytearray out, bint flashback) except -1:
        cdef object events = t.events
        cdef object gtid = t.gtid
        cdef object source = t.source
        cdef object first = t.start
        cdef object ev, b
        cdef Py_ssize_t start = PyByteArray_GET_SIZE(out)
        cdef bint wrote = False
        if t.kind == self.ddl or type(events) is not list or type(source) is not str or type(first) is not int:
            return False
        if gtid is not None and type(gtid) is not str:
            return False
        _put(out, "-- ", 3)
        _put_str(out, <str>gtid if gtid else "anonymous")
        _put(out, " at ", 4)
        _put_str(out, <str>source)
        _put(out, ":", 1)
        _put_int(out, first)
        _put(out, "\nBEGIN;\n", 8)
        for ev in (reversed(events) if flashback else events):
            b = ev.body
            if isinstance(b, self.rows_cls) and b.table is not None and not b.undecoded_reason:
                if self._rows(out, b, flashback):
                    wrote = True
        if not wrote:
            PyByteArray_Resize(out, start)
            return True
        _put(out, "COMMIT;\n", 8)
        return True

    def write(self, t, bytearray out, bint flashback):
        """Appends the block of ``t`` (see the class); True when written (or it has none), False
        when the caller must write it; on an error ``out`` is as it was."""
        cdef Py_ssize_t start = PyByteArray_GET_SIZE(out)
        try:
            return self._block(t, out, flashback)
        except BaseException:
            PyByteArray_Resize(out, start)
            raise
