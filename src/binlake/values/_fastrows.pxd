# What other compiled modules take from the row decoder: its per-image programs and the readers of
# one value, so a writer of another format (``binlake.arrowlog._fastvariant``) goes from the row
# bytes to its own bytes by the same reads, without a Python value per column.
from libc.stdint cimport int64_t, uint64_t


cdef enum Code:
    CALL, INT8, UINT8, INT16, UINT16, INT24, UINT24, INT32, UINT32, INT64, UINT64,
    FLOAT, DOUBLE, STR, JSON, TIME2, DATETIME2, TIMESTAMP2, DATE, YEAR, DECIMAL, BIT, TABLE


cdef struct Op:
    int code
    Py_ssize_t column
    Py_ssize_t size  # bytes checked present before the value is read (a length prefix's width)
    int a
    int b


# a DATETIME2's fields: year, month, day, hour, minute, second, microsecond
cdef struct Fields:
    int64_t y, mo, d, h, mi, sec, us


cdef class Image:
    cdef Op *ops
    cdef Py_ssize_t n
    cdef list objects
    cdef list template  # a row of ABSENT, copied for each image


cdef class RowsDecoder:
    cdef readonly Image before
    cdef readonly Image after
    cdef bint no_bytes  # neither image has a column: a row takes no bytes, none may follow

    cdef Py_ssize_t walk(self, object buf, const unsigned char *s, Py_ssize_t end, Py_ssize_t *pp) except -1


cdef Py_ssize_t value_end(Op *op, const unsigned char *s, Py_ssize_t size, Py_ssize_t p) except -1
cdef object read_value(Op *op, object obj, object buf, const unsigned char *s, Py_ssize_t size,
                       Py_ssize_t *pp)
cdef bint valid_date(int64_t y, int64_t m, int64_t d) noexcept
cdef bint datetime2_fields(const unsigned char *s, int fsp, Fields *f) noexcept
cdef int64_t timestamp2_total(const unsigned char *s, int fsp) noexcept
cdef int64_t time2_us(const unsigned char *s, int fsp) noexcept
cdef int decimal_groups(const unsigned char *s, int precision, int scale, uint64_t *groups, int *digits) noexcept
