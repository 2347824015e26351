# Integers of 0-8 bytes read in C, shared by the compiled decoders (callers check the bounds first).
from libc.stdint cimport uint64_t


cdef inline uint64_t le(const unsigned char *s, int n) noexcept:
    """A little-endian unsigned integer of ``n`` bytes."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(n - 1, -1, -1):
        v = v << 8 | s[i]
    return v


cdef inline uint64_t be(const unsigned char *s, int n) noexcept:
    """A big-endian unsigned integer of ``n`` bytes."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(n):
        v = v << 8 | s[i]
    return v
