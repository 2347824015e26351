# What other compiled modules take from the envelope: making slots dataclass instances from C, and
# the event decoder (called from C without the Python call).
from cpython.object cimport PyTypeObject


cdef class Maker:
    cdef object cls
    cdef PyTypeObject *tp
    cdef Py_ssize_t offsets[24]
    cdef Py_ssize_t n
    cdef bint direct

    cdef object make(self, tuple values)


cpdef object decode_event(object decoder, bytes raw, Py_ssize_t offset)
