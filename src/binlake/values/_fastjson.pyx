# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""MySQL's binary JSON read in C: ``decode_json_column`` of ``binlake.values.json_binary`` (the
reference, whose checks this follows one for one), giving the same values (``JsonUInt`` for
unsigned integers, opaque values through the reference's ``_opaque``) and failing where it fails
(``JsonError``). Every read is checked against the document's bytes before it happens.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_New, PyDict_SetItem
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint64_t
from libc.string cimport memcpy

from binlake.values._bytes cimport le

from binlake.values.json_binary import Json, JsonError, JsonUInt, _opaque

INTERFACE = 1  # what ``binlake.values.rowops`` expects (``binlake.native``: a stale build is not used)

cdef enum:  # the value types of json_binary.cc (json_binary.py names them alike)
    SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY, LITERAL, INT16, UINT16, INT32, UINT32,
    INT64, UINT64, DOUBLE, STRING
    OPAQUE = 15
    MAX_DEPTH = 150


# the bytes of each inline or fixed-width scalar type (0: a container, a length-prefixed value)
cdef int SCALAR_WIDTH[16]
SCALAR_WIDTH[:] = [0, 0, 0, 0, 1, 2, 2, 4, 4, 8, 8, 8, 0, 0, 0, 0]


cdef struct Doc:
    const unsigned char *s
    Py_ssize_t size  # the document's bytes: fixed-width reads are bounded by these (as the reference)
    Py_ssize_t budget  # bytes left to decode: more than the document holds means overlapping values
    Py_ssize_t opaque  # opaque values met (a document with none is ``plain``)


cdef inline int need(Doc *d, Py_ssize_t pos, Py_ssize_t n) except -1:
    if pos < 0 or pos + n > d.size:
        raise JsonError(f"truncated JSON value: {n} bytes at {pos} of {d.size}")
    return 0


cdef inline int spend(Doc *d, Py_ssize_t n) except -1:
    d.budget -= n
    if d.budget < 0:
        raise JsonError("values overlap: the document decodes to more than its bytes hold")
    return 0


cdef inline str utf8(const unsigned char *s, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<char *>s, n, "surrogateescape")


cdef Py_ssize_t varlen(Doc *d, Py_ssize_t *pos, Py_ssize_t end) except -1:
    """A string's length: 7 bits per byte, low bits first, at most 5 bytes."""
    cdef Py_ssize_t n = 0
    cdef int i
    cdef unsigned char b
    for i in range(5):
        if pos[0] >= end:
            raise JsonError("truncated length")
        need(d, pos[0], 1)
        b = d.s[pos[0]]
        pos[0] += 1
        n |= <Py_ssize_t>(b & 0x7F) << (7 * i)
        if not b & 0x80:
            return n
    raise JsonError("length of more than 5 bytes")


cdef object scalar(Doc *d, int t, Py_ssize_t pos, Py_ssize_t end):
    cdef double f
    cdef Py_ssize_t n, p
    cdef int ftype
    if t < 16 and SCALAR_WIDTH[t]:
        need(d, pos, SCALAR_WIDTH[t])
    if t == LITERAL:
        if d.s[pos] == 0:
            return None
        if d.s[pos] == 1:
            return True
        if d.s[pos] == 2:
            return False
        raise JsonError(f"bad literal {d.s[pos]}")
    if t == INT16:
        return <int16_t>le(d.s + pos, 2)
    if t == UINT16:
        return JsonUInt(<int>le(d.s + pos, 2))
    if t == INT32:
        return <int32_t>le(d.s + pos, 4)
    if t == UINT32:
        return JsonUInt(le(d.s + pos, 4))
    if t == INT64:
        return <int64_t>le(d.s + pos, 8)
    if t == UINT64:
        return JsonUInt(le(d.s + pos, 8))
    if t == DOUBLE:
        memcpy(&f, d.s + pos, 8)
        return f
    if t == STRING:
        p = pos
        n = varlen(d, &p, end)
        if p + n > end:
            raise JsonError("string runs past the value")
        spend(d, n)
        return utf8(d.s + p, n)
    if t == OPAQUE:
        if pos >= end:
            raise JsonError("truncated opaque")
        need(d, pos, 1)
        ftype = d.s[pos]
        p = pos + 1
        n = varlen(d, &p, end)
        if p + n > end:
            raise JsonError("opaque runs past the value")
        spend(d, n)
        d.opaque += 1
        return _opaque(ftype, PyBytes_FromStringAndSize(<char *>d.s + p, n))
    raise JsonError(f"unknown JSON type 0x{t:02x}")


cdef object container(Doc *d, int t, Py_ssize_t base, Py_ssize_t end, int depth):
    """An object or array, checked as the reference's ``_read_container`` checks it."""
    if depth > MAX_DEPTH:
        raise JsonError("nesting deeper than 150")
    cdef bint large = t == LARGE_OBJECT or t == LARGE_ARRAY
    cdef int osz = 4 if large else 2
    if base + 2 * osz > end:
        raise JsonError("truncated container header")
    need(d, base, 2 * osz)
    cdef Py_ssize_t count = <Py_ssize_t>le(d.s + base, osz)
    cdef Py_ssize_t size = <Py_ssize_t>le(d.s + base + osz, osz)
    spend(d, count)
    if base + size > end:
        raise JsonError(f"container size {size} runs past the value")
    cdef Py_ssize_t cend = base + size
    cdef bint is_object = t == SMALL_OBJECT or t == LARGE_OBJECT
    cdef Py_ssize_t p = base + 2 * osz, k, koff, klen, q, n
    cdef list keys = None
    if is_object:
        if p + count * (osz + 2) > cend:
            raise JsonError("key entries run past the container")
        keys = PyList_New(count)
        for k in range(count):
            koff = <Py_ssize_t>le(d.s + p, osz)
            klen = <Py_ssize_t>le(d.s + p + osz, 2)
            p += osz + 2
            if base + koff + klen > cend:
                raise JsonError("key runs past the container")
            key = utf8(d.s + base + koff, klen)
            Py_INCREF(key)
            PyList_SET_ITEM(keys, k, key)
    cdef Py_ssize_t entry = 1 + osz
    if p + count * entry > cend:
        raise JsonError("value entries run past the container")
    cdef int vt
    out = PyDict_New() if is_object else PyList_New(count)
    for k in range(count):
        vt = d.s[p]
        if vt == INT16:
            value = <int16_t>le(d.s + p + 1, 2)
        elif vt == LITERAL and d.s[p + 1] <= 1:
            value = True if d.s[p + 1] else None
        elif vt == LITERAL or vt == UINT16 or (large and (vt == INT32 or vt == UINT32)):
            value = scalar(d, vt, p + 1, cend)
        else:
            q = base + <Py_ssize_t>le(d.s + p + 1, osz)
            if q >= cend:
                raise JsonError("value offset past the container")
            need(d, q, 1)
            if vt == STRING and d.s[q] < 0x80:  # a string of fewer than 128 bytes
                n = d.s[q]
                if q + 1 + n > cend:
                    raise JsonError("string runs past the value")
                spend(d, n)
                value = utf8(d.s + q + 1, n)
            elif vt <= LARGE_ARRAY:
                value = container(d, vt, q, cend, depth + 1)
            else:
                value = scalar(d, vt, q, cend)
        if is_object:
            PyDict_SetItem(out, <object>(<list>keys)[k], value)
        else:
            Py_INCREF(value)
            PyList_SET_ITEM(out, k, value)
        p += entry
    return out


def decode_json_column(bytes data not None):
    """A JSON column's value: ``Json`` of the document, ``plain`` when no opaque value was met;
    zero bytes are ``Json(None, empty=True)``."""
    cdef Doc d
    d.s = <const unsigned char *>PyBytes_AS_STRING(data)
    d.size = PyBytes_GET_SIZE(data)
    if d.size == 0:
        return Json(None, empty=True)
    d.budget = d.size
    d.opaque = 0
    cdef int t = d.s[0]
    value = container(&d, t, 1, d.size, 0) if t <= LARGE_ARRAY else scalar(&d, t, 1, d.size)
    return Json(value, plain=not d.opaque)
