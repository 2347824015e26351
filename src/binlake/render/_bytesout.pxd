# cython: language_level=3
"""Text appended to a bytearray as the output writer encodes it (UTF-8 with surrogate escapes), and
the one test of text the formatters write as it is: shared by the compiled formatters
(``_fastrender``, ``_fastjoin``)."""

from libc.string cimport memcpy


cdef extern from "Python.h":
    char *PyBytes_AS_STRING(object)
    Py_ssize_t PyBytes_GET_SIZE(object)
    char *PyByteArray_AS_STRING(object)
    Py_ssize_t PyByteArray_GET_SIZE(object)
    int PyByteArray_Resize(object, Py_ssize_t) except -1
    bint PyUnicode_IS_ASCII(object)
    void *PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    object PyUnicode_AsEncodedString(object, const char *, const char *)


cdef inline int _put(bytearray out, const char *p, Py_ssize_t n) except -1:
    cdef Py_ssize_t size = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, size + n)
    memcpy(PyByteArray_AS_STRING(out) + size, p, n)
    return 0


cdef inline int _put_bytes(bytearray out, bytes b) except -1:
    return _put(out, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))


cdef inline int _put_str(bytearray out, str s) except -1:
    """``s`` as UTF-8 with surrogate escapes (ASCII text copied as it is; the encoder's error else)."""
    if PyUnicode_IS_ASCII(s):
        return _put(out, <const char *>PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s))
    return _put_bytes(out, PyUnicode_AsEncodedString(s, "utf-8", "surrogateescape"))


cdef inline bint _plain_decimal(str s):
    """``str`` of a Decimal in plain notation (digits, one point, a sign): what ``format(v, "f")``
    writes of it too (scientific notation, NaN and infinities are not plain)."""
    cdef Py_ssize_t j, n = PyUnicode_GET_LENGTH(s)
    cdef char c
    if not PyUnicode_IS_ASCII(s):
        return False
    for j in range(n):
        c = (<const char *>PyUnicode_DATA(s))[j]
        if not (48 <= c <= 57 or c == 46 or c == 45):
            return False
    return n > 0
