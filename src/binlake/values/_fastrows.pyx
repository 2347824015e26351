# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Row images decoded in C: an interpreter of the per-image program ``binlake.values.rowops`` builds
(one operation per present column, held as data), giving exactly the values of the pure path
(``binlake.values.plan``, the reference) and calling a column's Python decoder for the types it has
no operation for.

Every read is checked against the end of the buffer before it happens, and lengths read from the
image are checked before anything is allocated from them: damage raises ``ValueError`` (the
decoder reports it as ``MalformedEventError``, as it does the pure path's errors).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.datetime cimport date_new, datetime_new, import_datetime, timedelta_new
from cpython.list cimport PyList_GET_ITEM
from cpython.unicode cimport PyUnicode_Decode, PyUnicode_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, int8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from binlake.values._bytes cimport be, le

import datetime as _dt
from decimal import Decimal

from binlake.values.temporal import MysqlDate, MysqlDateTime

import_datetime()

# what binlake.values.plan expects of this module (a build older than the source is not used)
INTERFACE = 4

cdef object UTC = _dt.timezone.utc
cdef object ZERO_TIMESTAMP = MysqlDateTime(0, 0, 0)

# the operation names rowops uses -> their codes
CODES = {
    "CALL": CALL, "INT8": INT8, "UINT8": UINT8, "INT16": INT16, "UINT16": UINT16, "INT24": INT24,
    "UINT24": UINT24, "INT32": INT32, "UINT32": UINT32, "INT64": INT64, "UINT64": UINT64,
    "FLOAT": FLOAT, "DOUBLE": DOUBLE, "STR": STR, "JSON": JSON, "TIME2": TIME2,
    "DATETIME2": DATETIME2, "TIMESTAMP2": TIMESTAMP2, "DATE": DATE, "YEAR": YEAR,
    "DECIMAL": DECIMAL, "BIT": BIT, "TABLE": TABLE,
}
# the bytes of each fixed-width operation
_FIXED = {
    "INT8": 1, "UINT8": 1, "INT16": 2, "UINT16": 2, "INT24": 3, "UINT24": 3, "INT32": 4, "UINT32": 4,
    "INT64": 8, "UINT64": 8, "FLOAT": 4, "DOUBLE": 8, "DATE": 3, "YEAR": 1, "TABLE": 1,
}
cdef int DIG2BYTES[10]
DIG2BYTES[:] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]
cdef uint32_t POW10[10]
POW10[:] = [1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000]
cdef int MONTH_DAYS[13]
MONTH_DAYS[:] = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


# the range of ``a`` each operation that has one accepts (checked when a program is built)
_A_RANGE = {"STR": (1, 4), "JSON": (1, 4), "BIT": (1, 8), "DECIMAL": (1, 65), "TIME2": (0, 255),
            "DATETIME2": (0, 6), "TIMESTAMP2": (0, 6)}


def _size(str name, int a, int b):
    """The bytes an operation reads before any length it carries (checked before reading)."""
    low, high = _A_RANGE.get(name, (a, a))
    if not low <= a <= high or (name == "DECIMAL" and not 0 <= b <= a):
        raise ValueError(f"operation {name} cannot take {a}, {b}")
    if name == "DECIMAL":
        return decimal_size(a, b)
    if name in _FIXED:
        return _FIXED[name]
    if name in ("STR", "JSON", "BIT"):
        return a
    if name == "TIME2":
        return 6 if a >= 5 else 3 + (a + 1) // 2
    if name == "DATETIME2":
        return 5 + (a + 1) // 2
    if name == "TIMESTAMP2":
        return 4 + (a + 1) // 2
    return 0  # CALL: the Python decoder checks its own reads


cdef Py_ssize_t decimal_size(int precision, int scale):
    cdef int intg = precision - scale
    return (intg // 9) * 4 + DIG2BYTES[intg % 9] + (scale // 9) * 4 + DIG2BYTES[scale % 9]


cdef class Image:
    """One image's operations: the present columns in the order their values are written."""

    def __cinit__(self, list program, Py_ssize_t ncols, object absent):
        self.n = len(program)
        self.ops = <Op *>malloc(max(self.n, 1) * sizeof(Op))
        if self.ops == NULL:
            raise MemoryError()
        self.objects = []
        self.template = [absent] * ncols
        cdef Py_ssize_t k = 0
        for column, name, a, b, obj in program:
            if not 0 <= column < ncols:
                raise ValueError(f"column {column} of {ncols}")
            self.ops[k].code = CODES[name]
            self.ops[k].column = column
            self.ops[k].a = a
            self.ops[k].b = b
            self.ops[k].size = _size(name, a, b)
            self.objects.append(obj)
            k += 1

    def __dealloc__(self):
        free(self.ops)


cdef class RowsDecoder:
    """``(buf, p, end) -> ([(before, after), …], p)``: every row of a rows event from ``p``."""

    def __init__(self, before, after, Py_ssize_t ncols, absent):
        self.before = None if before is None else Image(before, ncols, absent)
        self.after = None if after is None else Image(after, ncols, absent)
        self.no_bytes = not ((self.before is not None and self.before.n) or (self.after is not None and self.after.n))

    def __call__(self, object buf, Py_ssize_t p, Py_ssize_t end):
        if type(buf) is not bytes:
            buf = bytes(buf)
        cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
        cdef Py_ssize_t size = PyBytes_GET_SIZE(buf)
        cdef list out = []
        if p < 0:
            raise ValueError(f"row data cannot start at {p}")
        if self.no_bytes and p < end:
            raise ValueError(f"rows of no columns cannot hold {end - p} bytes")
        while p < end:
            b = None if self.before is None else read_image(self.before, buf, s, size, &p)
            a = None if self.after is None else read_image(self.after, buf, s, size, &p)
            out.append((b, a))
        return out, p

    def count(self, object buf, Py_ssize_t p, Py_ssize_t end):
        """``(rows, p)``: the rows walked by their lengths alone, no value made (what
        ``binlake.values.rowcount``'s counters do); a value running past the buffer raises."""
        if type(buf) is not bytes:
            buf = bytes(buf)
        if p < 0:
            raise ValueError(f"row data cannot start at {p}")
        cdef Py_ssize_t rows = self.walk(buf, <const unsigned char *>PyBytes_AS_STRING(buf), end, &p)
        return rows, p

    cdef Py_ssize_t walk(self, object buf, const unsigned char *s, Py_ssize_t end, Py_ssize_t *pp) except -1:
        """``count`` of the bytes ``buf`` (``s``) from ``pp`` (moved to where the walk ends)."""
        cdef Py_ssize_t size = PyBytes_GET_SIZE(buf), rows = 0
        if self.no_bytes:  # rows of no bytes: nothing can follow
            return 0
        while pp[0] < end:
            if self.before is not None:
                skip_image(self.before, buf, s, size, pp)
            if self.after is not None:
                skip_image(self.after, buf, s, size, pp)
            rows += 1
        return rows


cdef int skip_image(Image im, object buf, const unsigned char *s, Py_ssize_t size, Py_ssize_t *pp) except -1:
    """Move ``pp`` past one image by its lengths: fixed sizes, length prefixes, else the decoder."""
    if im.n == 0:
        return 0
    cdef Py_ssize_t p = pp[0], k
    cdef Py_ssize_t nb = (im.n + 7) >> 3
    if p + nb > size:
        raise ValueError("row image ends inside its NULL bitmap")
    cdef const unsigned char *nulls = s + p
    cdef Op *op
    p += nb
    for k in range(im.n):
        op = &im.ops[k]
        if nulls[k >> 3] >> (k & 7) & 1:
            continue
        if op.code == CALL:
            _, end = (<object>PyList_GET_ITEM(im.objects, k))(buf, p)
            if end < p or end > size:
                raise ValueError(f"a value runs past the row image ({end} of {size} bytes)")
            p = end
        else:
            p = value_end(op, s, size, p)
    pp[0] = p
    return 0


cdef Py_ssize_t value_end(Op *op, const unsigned char *s, Py_ssize_t size, Py_ssize_t p) except -1:
    """Where the value at ``p`` ends, by its operation's size and length prefix (not for CALL:
    only its decoder knows); a value running past the buffer raises."""
    cdef Py_ssize_t n
    if p + op.size > size:
        raise ValueError(f"a value runs past the row image ({p + op.size} of {size} bytes)")
    if op.code == STR or op.code == JSON:
        n = <Py_ssize_t>le(s + p, op.a)
        if n > size - p - op.size:
            raise ValueError(f"a string of {n} bytes runs past the row image")
        p += n
    return p + op.size


cdef list read_image(Image im, object buf, const unsigned char *s, Py_ssize_t size, Py_ssize_t *pp):
    cdef list row = im.template[:]
    if im.n == 0:  # an image of no columns is no bytes at all (not even a NULL bitmap)
        return row
    cdef Py_ssize_t p = pp[0]
    cdef Py_ssize_t nb = (im.n + 7) >> 3
    if p + nb > size:
        raise ValueError("row image ends inside its NULL bitmap")
    cdef const unsigned char *nulls = s + p
    p += nb
    cdef Py_ssize_t k
    cdef Op *op
    for k in range(im.n):
        op = &im.ops[k]
        if nulls[k >> 3] >> (k & 7) & 1:
            row[op.column] = None
        else:
            row[op.column] = read_value(op, <object>PyList_GET_ITEM(im.objects, k), buf, s, size, &p)
    pp[0] = p
    return row


cdef object read_value(Op *op, object obj, object buf, const unsigned char *s, Py_ssize_t size,
                       Py_ssize_t *pp):
    cdef Py_ssize_t p = pp[0]
    cdef Py_ssize_t n
    cdef int code = op.code
    cdef float f
    cdef double d
    if code == CALL:
        value, end = obj(buf, p)
        if end < p or end > size:
            raise ValueError(f"a value runs past the row image ({end} of {size} bytes)")
        pp[0] = end
        return value
    if p + op.size > size:
        raise ValueError(f"a value runs past the row image ({p + op.size} of {size} bytes)")
    pp[0] = p + op.size
    s += p
    if code == STR or code == JSON:
        n = <Py_ssize_t>le(s, op.a)
        if n > size - p - op.size:
            raise ValueError(f"a string of {n} bytes runs past the row image")
        pp[0] = p + op.size + n
        if code == JSON:
            return obj(PyBytes_FromStringAndSize(<const char *>s + op.a, n))
        return text(s + op.a, n, obj, op.b)
    if code == INT8:
        return <int8_t>s[0]
    if code == UINT8:
        return s[0]
    if code == INT16:
        return <int16_t>le(s, 2)
    if code == UINT16:
        return <int>le(s, 2)
    if code == INT24:
        n = <Py_ssize_t>le(s, 3)
        return n - 0x1000000 if n & 0x800000 else n
    if code == UINT24:
        return <long>le(s, 3)
    if code == INT32:
        return <int32_t>le(s, 4)
    if code == UINT32:
        return <uint32_t>le(s, 4)
    if code == INT64:
        return <int64_t>le(s, 8)
    if code == UINT64:
        return le(s, 8)
    if code == FLOAT:
        memcpy(&f, s, 4)
        return <double>f
    if code == DOUBLE:
        memcpy(&d, s, 8)
        return d
    if code == TABLE:
        return <object>PyList_GET_ITEM(obj, s[0])
    if code == YEAR:
        return s[0] + 1900 if s[0] else 0
    if code == BIT:
        return be(s, op.a)
    if code == DATE:
        return date_value(<int>le(s, 3))
    if code == DATETIME2:
        return datetime2_value(s, op.a)
    if code == TIMESTAMP2:
        return timestamp2_value(s, op.a)
    if code == TIME2:
        return time2_value(s, op.a)
    if code == DECIMAL:
        value = decimal_value(s, op.a, op.b, op.size)
        if value is None:  # a group over its digits: the Python decoder's arithmetic carries it
            value, end = obj(buf, p)
        return value
    raise ValueError(f"operation {code} is unknown")


cdef object text(const unsigned char *s, Py_ssize_t n, object codec, int pad_to):
    """Text by its codec, or the bytes when they do not decode; bytes when binary (BINARY(n)
    zero-padded to ``pad_to``, the server strips the zeros)."""
    cdef bytes raw
    if codec is None:
        if n >= pad_to:
            return PyBytes_FromStringAndSize(<const char *>s, n)
        raw = PyBytes_FromStringAndSize(NULL, pad_to)
        memcpy(PyBytes_AS_STRING(raw), s, n)
        memset(PyBytes_AS_STRING(raw) + n, 0, pad_to - n)
        return raw
    try:
        return PyUnicode_Decode(<char *>s, n, PyBytes_AS_STRING(codec), NULL)
    except UnicodeDecodeError:
        return PyBytes_FromStringAndSize(<const char *>s, n)


cdef bint valid_date(int64_t y, int64_t m, int64_t d) noexcept:
    if y < 1 or y > 9999 or m < 1 or m > 12 or d < 1:
        return False
    if m == 2 and y % 4 == 0 and (y % 100 != 0 or y % 400 == 0):
        return d <= 29
    return d <= MONTH_DAYS[m]


cdef object date_value(int x):
    cdef int y = x >> 9, m = (x >> 5) & 15, d = x & 31
    if valid_date(y, m, d):
        return date_new(y, m, d)
    return MysqlDate(y, m, d)


cdef inline int64_t fraction(const unsigned char *s, int fsp) noexcept:
    """DATETIME2/TIMESTAMP2's fraction in microseconds (big-endian, scaled by its bytes)."""
    cdef int n = (fsp + 1) // 2
    if n == 0:
        return 0
    if n == 1:
        return s[0] * 10000
    if n == 2:
        return (s[0] << 8 | s[1]) * 100
    return s[0] << 16 | s[1] << 8 | s[2]


cdef bint datetime2_fields(const unsigned char *s, int fsp, Fields *f) noexcept:
    """A DATETIME2's fields; whether they make a datetime (else a MysqlDateTime holds them)."""
    cdef int64_t x = <int64_t>be(s, 5) - 0x8000000000
    if x < 0:
        x = -x
    f.us = fraction(s + 5, fsp)
    cdef int64_t ymd = x >> 17, hms = x & 0x1FFFF
    f.y, f.mo, f.d = (ymd >> 5) // 13, (ymd >> 5) % 13, ymd & 31
    f.h, f.mi, f.sec = hms >> 12, (hms >> 6) & 63, hms & 63
    return valid_date(f.y, f.mo, f.d) and f.h < 24 and f.mi < 60 and f.sec < 60 and f.us < 1000000


cdef object datetime2_value(const unsigned char *s, int fsp):
    cdef Fields f
    if datetime2_fields(s, fsp, &f):
        return datetime_new(f.y, f.mo, f.d, f.h, f.mi, f.sec, f.us, None)
    return MysqlDateTime(f.y, f.mo, f.d, f.h, f.mi, f.sec, f.us)


cdef int64_t timestamp2_total(const unsigned char *s, int fsp) noexcept:
    """A TIMESTAMP2 in microseconds since the epoch (0: the zero TIMESTAMP)."""
    return <int64_t>be(s, 4) * 1000000 + fraction(s + 4, fsp)


cdef object timestamp2_value(const unsigned char *s, int fsp):
    """The epoch plus the seconds and microseconds, in UTC (the zero TIMESTAMP: MysqlDateTime)."""
    cdef int64_t total = timestamp2_total(s, fsp)
    if total == 0:
        return ZERO_TIMESTAMP
    cdef int64_t secs = total // 1000000, days = secs // 86400, rem = secs % 86400
    # days since the epoch -> the civil date (H. Hinnant's algorithm; days >= 0 here)
    cdef int64_t z = days + 719468
    cdef int64_t era = z // 146097, doe = z - era * 146097
    cdef int64_t yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    cdef int64_t doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    cdef int64_t mp = (5 * doy + 2) // 153
    cdef int64_t d = doy - (153 * mp + 2) // 5 + 1
    cdef int64_t m = mp + 3 if mp < 10 else mp - 9
    cdef int64_t y = yoe + era * 400 + (1 if m <= 2 else 0)
    return datetime_new(y, m, d, rem // 3600, rem // 60 % 60, rem % 60, total % 1000000, UTC)


cdef int64_t time2_us(const unsigned char *s, int fsp) noexcept:
    """MySQL's packed TIME (negative fractions stored reversed) in signed microseconds."""
    cdef int64_t x, f
    if fsp >= 5:
        x = <int64_t>be(s, 6) - 0x800000000000
    else:
        x = <int64_t>be(s, 3) - 0x800000
        if fsp == 0:
            x = x * 0x1000000
        elif fsp <= 2:
            f = s[3]
            if x < 0 and f:
                x += 1
                f -= 0x100
            x = x * 0x1000000 + f * 10000
        else:
            f = s[3] << 8 | s[4]
            if x < 0 and f:
                x += 1
                f -= 0x10000
            x = x * 0x1000000 + f * 100
    cdef bint negative = x < 0
    if negative:
        x = -x
    cdef int64_t hms = x >> 24
    cdef int64_t us = (((hms >> 12) & 0x3FF) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63)) * 1000000 + (x & 0xFFFFFF)
    return -us if negative else us


cdef object time2_value(const unsigned char *s, int fsp):
    """``time2_us`` as one timedelta."""
    cdef int64_t us = time2_us(s, fsp)
    cdef int64_t a = -us if us < 0 else us
    cdef int secs = <int>(a // 1000000)
    cdef int frac = <int>(a % 1000000)
    return timedelta_new(0, -secs, -frac) if us < 0 else timedelta_new(0, secs, frac)


cdef int decimal_groups(const unsigned char *s, int precision, int scale, uint64_t *groups, int *digits) noexcept:
    """MySQL's binary DECIMAL (sign bit flipped, negatives inverted, 9 digits per 4 bytes): each
    stored group's value and digits, most significant first, into ``groups`` and ``digits`` (20
    each); their number, negated for a negative number; 0 when a group holds more than its digits
    (the Python decoder's arithmetic carries those)."""
    cdef unsigned char flip = 0 if s[0] & 0x80 else 0xFF
    cdef int intg = precision - scale
    cdef int ngroups = 0, i, k, nbytes
    cdef uint64_t g
    cdef unsigned char b[4]
    if intg % 9:
        digits[ngroups] = intg % 9
        ngroups += 1
    for i in range(intg // 9 + scale // 9):
        digits[ngroups] = 9
        ngroups += 1
    if scale % 9:
        digits[ngroups] = scale % 9
        ngroups += 1
    cdef Py_ssize_t at = 0
    for i in range(ngroups):
        nbytes = DIG2BYTES[digits[i]]
        for k in range(nbytes):
            b[k] = s[at + k] ^ flip
        if at == 0:
            b[0] &= 0x7F
        at += nbytes
        g = be(b, nbytes)
        if g >= POW10[digits[i]]:
            return 0
        groups[i] = g
    return -ngroups if flip else ngroups


cdef object decimal_value(const unsigned char *s, int precision, int scale, Py_ssize_t size):
    """``decimal_groups`` as the pure path's ``Decimal(f"{n}e-{scale}")``; None when a group
    holds more than its digits."""
    cdef char text[80]
    cdef uint64_t groups[20]
    cdef int digits[20]
    cdef int ngroups = decimal_groups(s, precision, scale, groups, digits)
    cdef int i, k, nd = 0, first
    cdef uint64_t g
    if ngroups == 0:
        return None
    for i in range(ngroups if ngroups > 0 else -ngroups):
        g = groups[i]
        for k in range(digits[i] - 1, -1, -1):
            text[nd + k] = <char>(48 + g % 10)
            g //= 10
        nd += digits[i]
    first = 0
    while first < nd and text[first] == 48:
        first += 1
    if first == nd:
        number = "0"
    else:
        number = PyUnicode_FromStringAndSize(text + first, nd - first)
        if ngroups < 0:
            number = "-" + number
    return Decimal(f"{number}e-{scale}" if scale else number)


def rows_header(bytes buf not None, int post, int version, str op, object reference):
    """A rows event's header as ``reference`` (``events.rows._header``) reads it: (table id, flags,
    extra data, column count, before bitmap, after bitmap, where the rows start). The common layout
    is read here; anything else (a column count of more than one byte, a header cut short, a bad
    extra length) goes to ``reference``, which raises its own errors."""
    cdef const unsigned char *s = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(buf)
    cdef Py_ssize_t p = 4 if post == 6 else 6, extra_len, nb, ncols
    if size < p + 3:
        return reference(buf, post, version, op)
    cdef uint64_t table_id = le(s, <int>p)
    cdef int flags = <int>le(s + p, 2)
    p += 2
    extra = b""
    if version == 2 and post >= 10:
        if p + 2 > size:
            return reference(buf, post, version, op)
        extra_len = <Py_ssize_t>le(s + p, 2)
        if extra_len < 2 or p + extra_len > size:
            return reference(buf, post, version, op)
        if extra_len > 2:
            extra = PyBytes_FromStringAndSize(<const char *>s + p + 2, extra_len - 2)
        p += extra_len
    if p >= size or s[p] >= 0xFB:  # a count of one byte (a longer one: the reference)
        return reference(buf, post, version, op)
    ncols = s[p]
    p += 1
    nb = (ncols + 7) >> 3
    before = after = 0
    cdef bint insert = op == "insert", update = op == "update"
    if not insert:
        if p + nb > size:
            return reference(buf, post, version, op)
        before = bitmap(s + p, nb)
        p += nb
    if insert or (update and version > 0):
        if p + nb > size:
            return reference(buf, post, version, op)
        after = bitmap(s + p, nb)
        p += nb
    elif update:
        after = before
    return table_id, flags, extra, ncols, before, after, p


cdef object bitmap(const unsigned char *s, Py_ssize_t nb):
    """A column bitmap of ``nb`` bytes as the reference reads it: one little-endian number (wider
    than 64 columns, a table grown by ALTERs, a Python int of its bytes)."""
    if nb <= 8:
        return <uint64_t>le(s, <int>nb)
    return int.from_bytes(PyBytes_FromStringAndSize(<const char *>s, nb), "little")
