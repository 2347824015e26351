"""Little-endian integers, length-encoded integers, bitmaps and CRC32: the byte-level vocabulary.

No I/O. ``Cursor`` walks a buffer and raises ``ShortRead`` when a layout asks for bytes that are not
there; the event layer turns that into a ``MalformedEventError`` with the file and offset.
"""

from __future__ import annotations

import struct
import zlib

U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
I8 = struct.Struct("<b")
I16 = struct.Struct("<h")
I32 = struct.Struct("<i")
I64 = struct.Struct("<q")
F32 = struct.Struct("<f")
F64 = struct.Struct("<d")


class ShortRead(Exception):
    """A layout asked for more bytes than the buffer holds."""


def crc32(data: bytes | bytearray | memoryview) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def uint_le(data: bytes | memoryview, pos: int, size: int) -> int:
    return int.from_bytes(data[pos : pos + size], "little")


def uint_be(data: bytes | memoryview, pos: int, size: int) -> int:
    return int.from_bytes(data[pos : pos + size], "big")


class Cursor:
    """A read position over an immutable buffer, with bounds checks on every read."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise ShortRead(f"needs {n} bytes at body offset {self.pos}, only {self.end - self.pos} left")

    def skip(self, n: int) -> None:
        self.need(n)
        self.pos += n

    def take(self, n: int) -> bytes:
        self.need(n)
        p = self.pos
        self.pos = p + n
        return self.buf[p : p + n]

    def rest(self) -> bytes:
        p = self.pos
        self.pos = self.end
        return self.buf[p : self.end]

    def u8(self) -> int:
        self.need(1)
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def u16(self) -> int:
        self.need(2)
        (v,) = U16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return v

    def u24(self) -> int:
        return self.uint(3)

    def u32(self) -> int:
        self.need(4)
        (v,) = U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def u64(self) -> int:
        self.need(8)
        (v,) = U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def uint(self, n: int) -> int:
        self.need(n)
        v = int.from_bytes(self.buf[self.pos : self.pos + n], "little")
        self.pos += n
        return v

    def lenenc(self) -> int | None:
        """MySQL length-encoded integer; ``None`` for the NULL marker 0xfb."""
        first = self.u8()
        if first < 0xFB:
            return first
        if first == 0xFB:
            return None
        if first == 0xFC:
            return self.u16()
        if first == 0xFD:
            return self.uint(3)
        if first == 0xFE:
            return self.u64()
        raise ShortRead("0xff is not a length-encoded integer")

    def lenenc_bytes(self) -> bytes:
        n = self.lenenc()
        return self.take(n or 0)

    def cstring(self) -> bytes:
        """Bytes up to a NUL (consumed, not returned)."""
        i = self.buf.find(b"\0", self.pos, self.end)
        if i < 0:
            raise ShortRead("missing NUL terminator")
        v = self.buf[self.pos : i]
        self.pos = i + 1
        return v

    def bitmap(self, nbits: int) -> int:
        """A little-endian bitmap of ``nbits`` bits as an int (bit i = column i)."""
        return int.from_bytes(self.take((nbits + 7) >> 3), "little")


def bits_set(bitmap: int, nbits: int) -> list[int]:
    return [i for i in range(nbits) if bitmap >> i & 1]


def encode_lenenc(n: int) -> bytes:
    if n < 0xFB:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")
