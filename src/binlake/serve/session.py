"""One client connection's protocol state machine, sans-I/O: ``receive`` the client's bytes,
``pump`` while a dump runs, and send what ``data_to_send`` returns. No socket here.

States: greeting sent → (auth switch) → commands → dump → closed. Every packet a client sends is
untrusted: one over ``max_packet`` is refused from its header (ERR 1153, connection closed) before
its body is buffered, a handshake that does not parse is ERR 1043, a malformed command is an ERR and
the connection goes on. The reply to a command continues the client's packet sequence numbers; the
events of a dump follow COM_BINLOG_DUMP's, one per packet (events over 16 MiB split as the
protocol splits any payload).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import Enum

from binlake.errors import BinlogError
from binlake.events.gtid import PreviousGtids, decode_previous_gtids
from binlake.gtid import GtidSet
from binlake.replication.packets import (
    COM_BINLOG_DUMP,
    COM_BINLOG_DUMP_GTID,
    COM_INIT_DB,
    COM_PING,
    COM_QUERY,
    COM_QUIT,
    COM_REGISTER_SLAVE,
    OK,
    PacketError,
    PacketReader,
    PacketTooLarge,
    eof_packet,
    err_packet,
    frame,
    ok_packet,
    packet_count,
)
from binlake.serve import auth
from binlake.serve.directory import BinlogDirectory
from binlake.serve.dump import ClientSettings, Dump, DumpError, DumpRequest, Finished, Idle
from binlake.serve.queries import Done, QueryContext, Refused, Rows, answer
from binlake.serve.resultset import result_set

ER_BAD_HANDSHAKE = 1043
ER_ACCESS_DENIED = 1045
ER_UNKNOWN_COM = 1047
ER_NET_PACKET_TOO_LARGE = 1153
ER_MALFORMED_PACKET = 1835
ER_NOT_SUPPORTED_AUTH_MODE = 1251


@dataclass(frozen=True)
class ServeConfig:
    """How the served "server" presents itself and whom it lets in. The password is not in repr."""

    user: str
    password: str = field(repr=False)
    server_id: int = 1
    version: str | None = None  # None: derived from the newest file's format event
    max_packet: int = 1 << 20  # the largest payload a client may send
    port: int = 0


class State(Enum):
    AUTH = "auth"
    AUTH_SWITCH = "auth switch"
    COMMAND = "command"
    DUMP = "dump"
    CLOSED = "closed"


class Session:
    """One connection. ``closed`` once the client quit or was refused (after the last bytes are
    sent); ``dumping`` while ``pump`` has events to give."""

    def __init__(
        self,
        config: ServeConfig,
        directory: BinlogDirectory,
        *,
        connection_id: int = 1,
        peer: str = "localhost",
        scramble: bytes | None = None,
    ) -> None:
        self.config = config
        self.peer = peer
        self.state = State.AUTH
        self.user: str | None = None
        self.dump: Dump | None = None
        self.query = QueryContext(directory, config.server_id, config.version, config.port)
        self._scramble = scramble or auth.new_scramble()
        self._reader = PacketReader(max_payload=config.max_packet)
        self._out = bytearray()
        self._seq = 0
        self._last_sent = 0.0
        self._send(auth.greeting(self.query.server_version(), connection_id, self._scramble))

    # -- output -----------------------------------------------------------------------------

    def _send(self, payload: bytes) -> None:
        self._out += frame(payload, self._seq)
        self._seq = (self._seq + packet_count(len(payload))) & 0xFF

    def _error(self, code: int, message: str, state: str = "HY000") -> None:
        self._send(err_packet(code, message, state))

    def _close(self, code: int | None = None, message: str = "", state: str = "HY000") -> None:
        if code is not None:
            self._error(code, message, state)
        if self.dump is not None:
            self.dump.close()
        self.state = State.CLOSED

    def data_to_send(self) -> bytes:
        out, self._out = bytes(self._out), bytearray()
        return out

    @property
    def closed(self) -> bool:
        return self.state is State.CLOSED

    @property
    def authenticated(self) -> bool:
        return self.state in (State.COMMAND, State.DUMP)

    @property
    def dumping(self) -> bool:
        return self.state is State.DUMP

    @property
    def heartbeat_period(self) -> float | None:
        """Seconds between heartbeats the replica asked for (``@master_heartbeat_period``, ns)."""
        raw = self.query.user_vars.get("master_heartbeat_period")
        try:
            ns = int(float(raw)) if raw else 0
        except ValueError:
            return None
        return ns / 1e9 if ns > 0 else None

    # -- input ------------------------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        """The client's bytes, in any pieces; the replies go to the outbox."""
        if self.closed:
            return
        self._reader.feed(data)
        try:
            payloads = self._reader.payloads()
        except PacketTooLarge as e:
            self._close(
                ER_NET_PACKET_TOO_LARGE, f"Got a packet bigger than 'max_allowed_packet' bytes ({e})", "08S01"
            )
            return
        except PacketError as e:
            self._close(ER_MALFORMED_PACKET, f"Malformed communication packet ({e})", "08S01")
            return
        for payload in payloads:
            if self.closed:
                return
            self._seq = ((self._reader.seq or 0) + 1) & 0xFF
            if self.state is State.AUTH:
                self._handshake(payload)
            elif self.state is State.AUTH_SWITCH:
                self._authenticate(payload)
            elif self.state is State.COMMAND:
                self._command(payload)
            elif self.state is State.DUMP and payload[:1] == bytes([COM_QUIT]):
                self._close()

    # -- handshake --------------------------------------------------------------------------

    def _handshake(self, payload: bytes) -> None:
        try:
            resp = auth.parse_response(payload)
        except auth.BadHandshake as e:
            self._close(ER_BAD_HANDSHAKE, f"Bad handshake ({e})", "08S01")
            return
        if resp.wants_tls:
            self._close(
                ER_BAD_HANDSHAKE, "binlake serve does not offer TLS (connect with TLS disabled)", "08S01"
            )
            return
        self.user = resp.user
        if resp.plugin not in (None, auth.NATIVE):
            self.state = State.AUTH_SWITCH
            self._send(auth.auth_switch(self._scramble))
            return
        self._authenticate(resp.auth)

    def _authenticate(self, token: bytes) -> None:
        if self.state is State.AUTH_SWITCH and token[:1] == b"\xfe":
            self._close(ER_NOT_SUPPORTED_AUTH_MODE, "the client cannot use mysql_native_password", "08004")
            return
        user_ok = self.user == self.config.user
        if not (user_ok and auth.check_native(self.config.password, self._scramble, token)):
            using = "YES" if token else "NO"
            self._close(
                ER_ACCESS_DENIED,
                f"Access denied for user '{self.user}'@'{self.peer}' (using password: {using})",
                "28000",
            )
            return
        self.state = State.COMMAND
        self._send(ok_packet())

    # -- commands ---------------------------------------------------------------------------

    def _command(self, payload: bytes) -> None:
        if not payload:
            self._error(ER_MALFORMED_PACKET, "Malformed communication packet (empty)", "08S01")
            return
        cmd, body = payload[0], payload[1:]
        try:
            if cmd == COM_QUIT:
                self._close()
            elif cmd in (COM_PING, COM_INIT_DB):
                self._send(ok_packet())
            elif cmd == COM_QUERY:
                self._answer(body.decode("utf-8", "replace"))
            elif cmd == COM_REGISTER_SLAVE:
                if len(body) < 4:
                    raise ValueError("COM_REGISTER_SLAVE too short")
                self._send(ok_packet())
            elif cmd == COM_BINLOG_DUMP:
                self._start_dump(parse_dump(body))
            elif cmd == COM_BINLOG_DUMP_GTID:
                self._start_dump(parse_dump_gtid(body))
            else:
                self._error(ER_UNKNOWN_COM, f"Unknown command 0x{cmd:02x}", "08S01")
        except (ValueError, struct.error, IndexError) as e:
            self._error(ER_MALFORMED_PACKET, f"Malformed communication packet ({e})", "08S01")

    def _answer(self, sql: str) -> None:
        result = answer(sql, self.query)
        if isinstance(result, Rows):
            for p in result_set(result.columns, result.rows):
                self._send(p)
        elif isinstance(result, Done):
            self._send(ok_packet())
        elif isinstance(result, Refused):
            self._error(result.code, result.message, "42000")

    def _start_dump(self, request: DumpRequest) -> None:
        if self.query.user_vars.get("slave_connect_state") and not request.file and request.gtids is None:
            self._close(
                1236, "binlake serve does not take MariaDB GTID positions: start at a file and position"
            )
            return
        declared = self.query.user_vars.get("master_binlog_checksum")
        checksum = None if declared is None else declared.upper() == "CRC32"
        try:
            capability = int(self.query.user_vars.get("mariadb_slave_capability") or 0)
        except ValueError:
            capability = 0
        try:
            self.dump = Dump(
                self.query.directory,
                request,
                ClientSettings(checksum, capability),
                server_id=self.config.server_id,
            )
        except DumpError as e:
            self._close(e.code, str(e))
            return
        except (BinlogError, OSError) as e:
            self._close(1236, f"cannot read the binlog: {getattr(e, 'strerror', None) or e}")
            return
        self.state = State.DUMP

    # -- the dump ---------------------------------------------------------------------------

    def pump(self, now: float) -> bool:
        """Put the dump's next events (or a due heartbeat) in the outbox; False when there was
        nothing to send (the caller waits a little)."""
        if self.state is not State.DUMP or self.dump is None:
            return False
        try:
            got = self.dump.next_events()
        except DumpError as e:
            self._close(e.code, f"{e} (at {self.dump.file}:{self.dump.position})")
            return True
        except (BinlogError, OSError) as e:
            self._close(
                1236, f"cannot read the binlog: {getattr(e, 'strerror', None) or e} (at {self.dump.file})"
            )
            return True
        if isinstance(got, Finished):
            self._send(eof_packet())
            self._close()
            return True
        if isinstance(got, Idle):
            period = self.heartbeat_period
            if period is not None and now - self._last_sent >= period:
                self._send(bytes([OK]) + self.dump.heartbeat())
                self._last_sent = now
                return True
            return False
        for raw in got:
            self._send(bytes([OK]) + raw)
        self._last_sent = now
        return True


def parse_dump(body: bytes) -> DumpRequest:
    """COM_BINLOG_DUMP after its command byte: position u32, flags u16, server id u32, file name."""
    if len(body) < 10:
        raise ValueError(f"COM_BINLOG_DUMP of {len(body) + 1} bytes")
    position, flags, server_id = struct.unpack_from("<IHI", body)
    return DumpRequest(body[10:].decode("utf-8", "surrogateescape"), position, flags, server_id)


def parse_dump_gtid(body: bytes) -> DumpRequest:
    """COM_BINLOG_DUMP_GTID after its command byte: flags u16, server id u32, name length u32, name,
    position u64, data length u32, the GTID set (the layout of a PREVIOUS_GTIDS body)."""
    flags, server_id, name_len = struct.unpack_from("<HII", body)
    pos = 10
    if name_len > len(body) - pos:
        raise ValueError("file name past the end of the packet")
    name = body[pos : pos + name_len].decode("utf-8", "surrogateescape")
    pos += name_len
    position, data_len = struct.unpack_from("<QI", body, pos)
    pos += 12
    data = body[pos : pos + data_len]
    if len(data) != data_len:
        raise ValueError("GTID set past the end of the packet")
    gtids = GtidSet()
    if data_len:
        try:
            prev = decode_previous_gtids(data, None, None)  # type: ignore[arg-type]
        except Exception as e:  # ShortRead or any malformed set
            raise ValueError(f"bad GTID set: {e}") from None
        gtids = _gtid_set(prev)
    return DumpRequest(name.rstrip("\0"), position, flags, server_id, gtids)


def _gtid_set(prev: PreviousGtids) -> GtidSet:
    return GtidSet.from_dict({key: list(ivs) for key, ivs in prev.sets.items()})
