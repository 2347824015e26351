"""The events a dump thread sends that are not in its files, built as MySQL and MariaDB build them:
the fake ROTATE naming the file a dump reads (timestamp 0, log position 0, artificial flag), the
heartbeat of an idle dump, and the file's FORMAT_DESCRIPTION re-sent when a dump starts inside a
file (log position 0). A format event goes out with its in-use flag cleared, as servers send it."""

from __future__ import annotations

import struct

from binlake.events.types import FLAG_ARTIFICIAL, FLAG_BINLOG_IN_USE, EventType
from binlake.wire import crc32

HEADER = 19
CHECKSUM_SIZE = 4
LOG_POS = slice(13, 17)
FLAGS = slice(17, 19)


def build(type_code: int, body: bytes, *, server_id: int, log_pos: int, flags: int, checksum: bool) -> bytes:
    """One v4 event; a CRC32 of the rest appended when ``checksum``."""
    size = HEADER + len(body) + (CHECKSUM_SIZE if checksum else 0)
    raw = struct.pack("<IBIIIH", 0, type_code, server_id, size, log_pos, flags) + body
    return raw + struct.pack("<I", crc32(raw)) if checksum else raw


def fake_rotate(file: str, position: int, *, server_id: int, checksum: bool) -> bytes:
    """The ROTATE a dump starts each file with: "the events that follow are ``file`` from ``position``"."""
    body = struct.pack("<Q", position) + file.encode("utf-8", "surrogateescape")
    return build(
        EventType.ROTATE, body, server_id=server_id, log_pos=0, flags=FLAG_ARTIFICIAL, checksum=checksum
    )


def heartbeat(file: str, position: int, *, server_id: int, checksum: bool) -> bytes:
    """An idle dump's heartbeat: the file and position the replica has reached."""
    body = file.encode("utf-8", "surrogateescape")
    return build(EventType.HEARTBEAT, body, server_id=server_id, log_pos=position, flags=0, checksum=checksum)


def format_event_for_dump(raw: bytes, *, resent: bool, has_crc: bool) -> bytes:
    """A file's FORMAT_DESCRIPTION as a dump sends it: the in-use flag cleared and, ``resent`` at
    the start of a dump inside the file, log position 0. ``has_crc``: the event ends in a CRC32 slot
    (every format event since 5.6.1, even with checksums off); when the stored value is a real CRC32
    (of the event as written, or with the flag cleared as MySQL computes it) it is computed again for
    the bytes sent, otherwise left as it is."""
    out = bytearray(raw)
    flags = int.from_bytes(out[FLAGS], "little")
    out[FLAGS] = (flags & ~FLAG_BINLOG_IN_USE).to_bytes(2, "little")
    if resent:
        out[LOG_POS] = b"\0\0\0\0"
    if has_crc and len(raw) >= HEADER + CHECKSUM_SIZE:
        stored = int.from_bytes(raw[-CHECKSUM_SIZE:], "little")
        cleared = bytearray(raw[:-CHECKSUM_SIZE])
        cleared[FLAGS] = out[FLAGS]
        if stored in (crc32(raw[:-CHECKSUM_SIZE]), crc32(bytes(cleared))):
            out[-CHECKSUM_SIZE:] = struct.pack("<I", crc32(bytes(out[:-CHECKSUM_SIZE])))
    return bytes(out)
