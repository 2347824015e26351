"""The handshake of protocol 10 and ``mysql_native_password``, server side, sans-I/O: the greeting,
the client's HandshakeResponse41 parsed defensively (its bytes are untrusted), and the password
check. Only ``mysql_native_password`` is offered; a client answering with another plugin is
switched to it (AuthSwitchRequest), and one that cannot follow is refused."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
from dataclasses import dataclass

NATIVE = "mysql_native_password"
SCRAMBLE_LEN = 20

CLIENT_LONG_PASSWORD = 0x1
CLIENT_FOUND_ROWS = 0x2
CLIENT_LONG_FLAG = 0x4
CLIENT_CONNECT_WITH_DB = 0x8
CLIENT_PROTOCOL_41 = 0x200
CLIENT_SSL = 0x800
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_MULTI_RESULTS = 0x20000
CLIENT_PLUGIN_AUTH = 0x80000
CLIENT_CONNECT_ATTRS = 0x100000
CLIENT_PLUGIN_AUTH_LENENC = 0x200000

SERVER_CAPABILITIES = (
    CLIENT_LONG_PASSWORD
    | CLIENT_FOUND_ROWS
    | CLIENT_LONG_FLAG
    | CLIENT_CONNECT_WITH_DB
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH
    | CLIENT_CONNECT_ATTRS
    | CLIENT_PLUGIN_AUTH_LENENC
)
UTF8MB4_GENERAL_CI = 45
STATUS_AUTOCOMMIT = 0x2


class BadHandshake(ValueError):
    """The client's handshake response does not parse."""


def new_scramble() -> bytes:
    """20 random bytes without NUL (the greeting carries them NUL-terminated)."""
    return bytes(b % 255 + 1 for b in secrets.token_bytes(SCRAMBLE_LEN))


def greeting(version: str, connection_id: int, scramble: bytes) -> bytes:
    """The Initial Handshake Packet, protocol 10."""
    caps = SERVER_CAPABILITIES
    return (
        b"\x0a"
        + version.encode("utf-8", "replace")
        + b"\0"
        + struct.pack("<I", connection_id & 0xFFFFFFFF)
        + scramble[:8]
        + b"\0"
        + struct.pack(
            "<HBHHB", caps & 0xFFFF, UTF8MB4_GENERAL_CI, STATUS_AUTOCOMMIT, caps >> 16, SCRAMBLE_LEN + 1
        )
        + b"\0" * 10
        + scramble[8:]
        + b"\0"
        + NATIVE.encode()
        + b"\0"
    )


def auth_switch(scramble: bytes) -> bytes:
    """AuthSwitchRequest to mysql_native_password with the connection's scramble."""
    return b"\xfe" + NATIVE.encode() + b"\0" + scramble + b"\0"


@dataclass(frozen=True, slots=True)
class HandshakeResponse:
    capabilities: int
    user: str
    auth: bytes
    database: str | None
    plugin: str | None

    @property
    def wants_tls(self) -> bool:
        return bool(self.capabilities & CLIENT_SSL)


def _cstring(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.find(b"\0", pos)
    if end < 0:
        raise BadHandshake("a string without its terminating NUL")
    return data[pos:end], end + 1


def _lenenc(data: bytes, pos: int) -> tuple[int, int]:
    if pos >= len(data):
        raise BadHandshake("truncated length")
    first = data[pos]
    if first < 0xFB:
        return first, pos + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if width is None or pos + 1 + width > len(data):
        raise BadHandshake("bad length-encoded integer")
    return int.from_bytes(data[pos + 1 : pos + 1 + width], "little"), pos + 1 + width


def parse_response(data: bytes) -> HandshakeResponse:
    """HandshakeResponse41 (or the short SSLRequest, which has no user). Raises ``BadHandshake``."""
    if len(data) < 32:
        raise BadHandshake(f"a handshake response of {len(data)} bytes")
    caps = int.from_bytes(data[:4], "little")
    if not caps & CLIENT_PROTOCOL_41:
        raise BadHandshake("the client does not speak protocol 4.1")
    if len(data) == 32:  # SSLRequest
        return HandshakeResponse(caps, "", b"", None, None)
    pos = 32
    user, pos = _cstring(data, pos)
    if caps & CLIENT_PLUGIN_AUTH_LENENC:
        n, pos = _lenenc(data, pos)
        auth = data[pos : pos + n]
        pos += n
    elif caps & CLIENT_SECURE_CONNECTION:
        if pos >= len(data):
            raise BadHandshake("truncated auth response")
        n = data[pos]
        auth = data[pos + 1 : pos + 1 + n]
        pos += 1 + n
    else:
        auth, pos = _cstring(data, pos)
    if pos > len(data):
        raise BadHandshake("auth response past the end of the packet")
    database = None
    if caps & CLIENT_CONNECT_WITH_DB and pos < len(data):
        raw_db, pos = _cstring(data, pos)
        database = raw_db.decode("utf-8", "replace")
    plugin = None
    if caps & CLIENT_PLUGIN_AUTH and pos < len(data):
        raw_plugin, pos = _cstring(data, pos)
        plugin = raw_plugin.decode("ascii", "replace")
    return HandshakeResponse(caps, user.decode("utf-8", "replace"), auth, database, plugin)


def native_token(password: str, scramble: bytes) -> bytes:
    """What a client proves it knows: SHA1(pw) XOR SHA1(scramble + SHA1(SHA1(pw))); empty for ""."""
    if not password:
        return b""
    stage1 = hashlib.sha1(password.encode()).digest()
    stage2 = hashlib.sha1(stage1).digest()
    mix = hashlib.sha1(scramble + stage2).digest()
    return bytes(a ^ b for a, b in zip(stage1, mix, strict=True))


def check_native(password: str, scramble: bytes, auth: bytes) -> bool:
    return hmac.compare_digest(native_token(password, scramble), auth)
