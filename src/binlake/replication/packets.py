"""MySQL client/server packets for replication, sans-I/O: bytes in, payloads out, the command
payloads a replica sends, and the OK/ERR/EOF replies a server sends (``binlake serve``).

A packet is a 3-byte little-endian length, a 1-byte sequence number and the payload. A payload of
0xFFFFFF bytes or more is split into full-size packets followed by a shorter one (possibly empty);
``PacketReader`` joins them again, so a 40 MiB row event comes out as one payload.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from binlake.events.types import EventType
from binlake.wire import encode_lenenc

MAX_PACKET = 0xFFFFFF

# command bytes (include/my_command.h)
COM_QUIT = 0x01
COM_INIT_DB = 0x02
COM_QUERY = 0x03
COM_PING = 0x0E
COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E

# flags of COM_BINLOG_DUMP / COM_BINLOG_DUMP_GTID
DUMP_NON_BLOCK = 0x01  # the server answers EOF at the end of its binlogs instead of waiting
DUMP_THROUGH_POSITION = 0x02  # COM_BINLOG_DUMP_GTID: file + position are used too
DUMP_THROUGH_GTID = 0x04  # COM_BINLOG_DUMP_GTID: the GTID set is sent
MARIA_DUMP_ANNOTATE_ROWS = 0x02  # MariaDB: send ANNOTATE_ROWS events (without it they are left out)

# first byte of a server reply
OK, EOF, ERR = 0x00, 0xFE, 0xFF

# Events a dump thread sends that are not in its binlog file: they describe the stream.
STREAM_ONLY_EVENTS = frozenset({EventType.HEARTBEAT, EventType.HEARTBEAT_V2})


class PacketError(ValueError):
    """The server's bytes do not form packets (the connection is out of step)."""


class PacketTooLarge(PacketError):
    """A payload over the reader's ``max_payload``: refused from its header, before it is buffered."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a packet of {size} bytes is over the {limit}-byte limit")
        self.size, self.limit = size, limit


def packet_count(size: int) -> int:
    """How many packets ``frame`` makes of a payload of ``size`` bytes (a sequence number each)."""
    return size // MAX_PACKET + 1


def frame(payload: bytes, seq: int = 0) -> bytes:
    """The packets carrying ``payload``, split at 16 MiB as the protocol requires."""
    out = bytearray()
    pos = 0
    while True:
        chunk = payload[pos : pos + MAX_PACKET]
        out += len(chunk).to_bytes(3, "little") + bytes([seq & 0xFF]) + chunk
        seq += 1
        pos += len(chunk)
        if len(chunk) < MAX_PACKET:
            return bytes(out)


class PacketReader:
    """Feed bytes as they arrive; ``payloads()`` returns every complete (joined) payload so far.

    ``max_payload`` bounds what one payload may hold (a server reading an untrusted client): a
    packet header announcing more raises ``PacketTooLarge`` before its body is waited for, so memory
    stays bounded by the limit plus what one ``feed`` brings."""

    def __init__(self, max_payload: int | None = None) -> None:
        self._buf = bytearray()
        self._parts: list[bytes] = []
        self.seq: int | None = None  # sequence number of the last packet read
        self.max_payload = max_payload

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf) + sum(map(len, self._parts))

    def payloads(self) -> list[bytes]:
        out: list[bytes] = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= 4:
            size = int.from_bytes(buf[pos : pos + 3], "little")
            if self.max_payload is not None:
                joined = sum(map(len, self._parts)) + size
                if joined > self.max_payload:
                    raise PacketTooLarge(joined, self.max_payload)
            if len(buf) - pos - 4 < size:
                break
            seq = buf[pos + 3]
            if self.seq is not None and seq != (self.seq + 1) & 0xFF and self._parts:
                raise PacketError(f"packet sequence {seq} after {self.seq} inside a split payload")
            self.seq = seq
            self._parts.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
            if size < MAX_PACKET:
                out.append(self._parts[0] if len(self._parts) == 1 else b"".join(self._parts))
                self._parts = []
        del buf[:pos]
        return out


@dataclass(frozen=True, slots=True)
class ServerError:
    """An ERR packet: MySQL error code, SQLSTATE and message."""

    code: int
    state: str
    message: str

    def __str__(self) -> str:
        return f"server error {self.code} ({self.state}): {self.message}"


def parse_err(payload: bytes) -> ServerError:
    if not payload or payload[0] != ERR:
        raise PacketError(f"not an ERR packet: {payload[:8]!r}")
    code = int.from_bytes(payload[1:3], "little")
    rest = payload[3:]
    state = ""
    if rest[:1] == b"#":
        state, rest = rest[1:6].decode("ascii", "replace"), rest[6:]
    return ServerError(code, state, rest.decode("utf-8", "replace"))


def is_eof(payload: bytes) -> bool:
    """An EOF packet (end of a non-blocking dump): 0xFE and short, unlike an event."""
    return bool(payload) and payload[0] == EOF and len(payload) < 9


def register_slave(
    server_id: int, host: str = "", user: str = "", password: str = "", port: int = 0
) -> bytes:
    """COM_REGISTER_SLAVE: how the replica appears in SHOW SLAVE HOSTS."""
    fields = b"".join(
        bytes([len(v)]) + v for v in (host.encode()[:255], user.encode()[:255], password.encode()[:255])
    )
    return (
        bytes([COM_REGISTER_SLAVE])
        + struct.pack("<I", server_id)
        + fields
        + struct.pack("<HII", port, 0, 0)  # port, replication rank, master id
    )


def binlog_dump(server_id: int, file: str, position: int, flags: int = 0) -> bytes:
    """COM_BINLOG_DUMP: stream from ``file`` at ``position`` (a 4-byte position, as the command has)."""
    if position > 0xFFFFFFFF:
        raise ValueError(f"COM_BINLOG_DUMP cannot express position {position}; use the GTID dump")
    return bytes([COM_BINLOG_DUMP]) + struct.pack("<IHI", position, flags, server_id) + file.encode()


def binlog_dump_gtid(
    server_id: int, gtid_set: bytes, file: str = "", position: int = 4, flags: int = 0
) -> bytes:
    """COM_BINLOG_DUMP_GTID (MySQL): stream every transaction not in ``gtid_set`` (its binary
    encoding, the layout of a PREVIOUS_GTIDS body)."""
    name = file.encode()
    return (
        bytes([COM_BINLOG_DUMP_GTID])
        + struct.pack("<HII", flags | DUMP_THROUGH_GTID, server_id, len(name))
        + name
        + struct.pack("<QI", position, len(gtid_set))
        + gtid_set
    )


# -- what a server sends (binlake serve) ------------------------------------------------------

SERVER_STATUS_AUTOCOMMIT = 0x0002


def lenenc_str(value: bytes) -> bytes:
    return encode_lenenc(len(value)) + value


def ok_packet(affected_rows: int = 0, status: int = SERVER_STATUS_AUTOCOMMIT) -> bytes:
    """OK: affected rows, last insert id 0, status flags, no warnings."""
    return bytes([OK]) + encode_lenenc(affected_rows) + b"\0" + struct.pack("<HH", status, 0)


def eof_packet(status: int = SERVER_STATUS_AUTOCOMMIT) -> bytes:
    """EOF (clients without CLIENT_DEPRECATE_EOF): after column definitions and rows, and at the end
    of a non-blocking binlog dump."""
    return bytes([EOF]) + struct.pack("<HH", 0, status)


def err_packet(code: int, message: str, state: str = "HY000") -> bytes:
    """ERR with a SQLSTATE (protocol 4.1)."""
    return bytes([ERR]) + struct.pack("<H", code) + b"#" + state.encode("ascii")[:5] + message.encode()
