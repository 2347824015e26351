# What other compiled modules take from the envelope: making slots dataclass instances from C, and
# the event decoder (called from C without the Python call).
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport uint32_t


# a canonical XA statement's parts (``xa_parse``): its verb (an index of ``XA_KIND_VALUES``), where
# the hex digits of its gtrid and bqual are, its format id, ONE PHASE
cdef struct XaParts:
    int verb
    Py_ssize_t g0, g1, b0, b1
    unsigned long long fmt
    bint one_phase


cdef class Maker:
    cdef object cls
    cdef PyTypeObject *tp
    cdef Py_ssize_t offsets[24]
    cdef Py_ssize_t n
    cdef bint direct
    cdef tuple names

    cdef object make(self, tuple values)
    cdef Py_ssize_t offset_of(self, str name) except -2


cdef inline object slot(object o, Py_ssize_t off):
    """The value of the slot at ``off`` (``Maker.offset_of``) of ``o``, whose exact class the caller
    checked: a read without the attribute lookup. A slot never set raises AttributeError, as the
    attribute does."""
    cdef PyObject *v = (<PyObject **>(<char *><PyObject *>o + off))[0]
    if v == NULL:
        raise AttributeError("a slot that was never set")
    return <object>v


cpdef object decode_event(object decoder, bytes raw, Py_ssize_t offset)
cdef int envelope_checksum_size(object decoder, object fde) except -2
cdef object event_at(
    object decoder, object state, object fde, int csize, bint verify, const unsigned char *s,
    Py_ssize_t n, Py_ssize_t offset,
)
cdef uint32_t crc32_of(const unsigned char *p, Py_ssize_t n) noexcept nogil
cdef bint xa_parse(const unsigned char *s, Py_ssize_t start, Py_ssize_t end, XaParts *out) noexcept
cdef object xa_parts_id(const unsigned char *s, XaParts *x)
cdef object make_xa_id(object format_id, bytes gtrid, bytes bqual)
