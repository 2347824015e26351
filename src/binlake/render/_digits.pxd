# cython: language_level=3
"""Decimal digits written into a char buffer: what ``%lld``, ``%llu`` and ``%0Nd`` print, without
printf (whose format parsing was a tenth of ``dump``'s time). Shared by the compiled formatters
(``_fastrender``, ``_fastjoin``); each returns the number of bytes written."""


cdef inline int u64_text(char *buf, unsigned long long x) noexcept nogil:
    """``%llu``: at most 20 bytes."""
    cdef char tmp[20]
    cdef int n = 0, j
    while True:
        tmp[n] = <char>(48 + x % 10)
        n += 1
        x //= 10
        if x == 0:
            break
    for j in range(n):
        buf[j] = tmp[n - 1 - j]
    return n


cdef inline int i64_text(char *buf, long long x) noexcept nogil:
    """``%lld``: at most 20 bytes (the most negative value too)."""
    if x < 0:
        buf[0] = 45  # -
        return 1 + u64_text(buf + 1, <unsigned long long>(-(x + 1)) + 1)
    return u64_text(buf, <unsigned long long>x)


cdef inline int padded(char *buf, long long x, int width) noexcept nogil:
    """``%0{width}d`` of 0 <= ``x`` < 10 ** width: exactly ``width`` digits."""
    cdef int j
    for j in range(width - 1, -1, -1):
        buf[j] = <char>(48 + x % 10)
        x //= 10
    return width


cdef inline int bits_text(char *buf, unsigned long long x, int width) noexcept nogil:
    """``"b'" + format(x, "0{width}b") + "'"``: the bits of ``x`` zero-padded to ``width`` (more when
    ``x`` needs them); ``max(width, bits of x) + 3`` bytes."""
    cdef int n = 0, j
    cdef unsigned long long y = x
    while y:
        n += 1
        y >>= 1
    if n < width:
        n = width
    if n < 1:
        n = 1
    buf[0] = 98  # b
    buf[1] = 39  # '
    for j in range(n):
        buf[2 + j] = 49 if (x >> (n - 1 - j)) & 1 else 48
    buf[2 + n] = 39
    return n + 3
