"""The replica: connects to a server, asks for a binlog dump and feeds the packets to the sans-I/O
``ReplicationStream``; on a dropped connection or a restarted server it reconnects with backoff from
the last complete transaction, so consumers see no gap and no duplicate.

PyMySQL does the handshake and authentication only (caching_sha2_password, TLS); after the set-up
queries the client reads and writes the socket itself, with its own packet framing.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from binlake.errors import ConnectionLostError, ReplicationError
from binlake.events.gtid import PreviousGtids, encode_previous_gtids
from binlake.gtid import GtidSet, MariaGtidPos
from binlake.replication.packets import (
    DUMP_NON_BLOCK,
    MARIA_DUMP_ANNOTATE_ROWS,
    OK,
    PacketReader,
    binlog_dump,
    binlog_dump_gtid,
    frame,
    parse_err,
    register_slave,
)
from binlake.replication.stream import EndOfStream, ReplicationStream, ResumePoint, StreamEvent
from binlake.txn import Transaction

# Server errors after which asking again can succeed: shutdown, killed connection, lost connection.
RETRYABLE_CODES = frozenset({1053, 1927, 2002, 2003, 2006, 2013, 2055})
MARIA_CAPABILITY_GTID = 4  # MARIA_SLAVE_CAPABILITY_MINE: send every MariaDB event as written


@dataclass(frozen=True)
class ServerAddress:
    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = ""
    unix_socket: str | None = None
    ssl_ca: str | None = None  # verify the server's certificate against this CA (TLS required)
    ssl_cert: str | None = None
    ssl_key: str | None = None
    ssl_disabled: bool = False  # otherwise TLS is used whenever the server offers it
    connect_timeout: float = 10.0

    @property
    def label(self) -> str:
        return self.unix_socket or f"{self.host}:{self.port}"

    def connect(self) -> Any:
        """A PyMySQL connection; its failures become ``ReplicationError`` with the server's code."""
        import pymysql

        try:
            return pymysql.connect(
                host=self.host,
                port=self.port,
                user=self.user,
                password=self.password,
                unix_socket=self.unix_socket,
                ssl_ca=self.ssl_ca,
                ssl_cert=self.ssl_cert,
                ssl_key=self.ssl_key,
                ssl_disabled=self.ssl_disabled,
                connect_timeout=self.connect_timeout,
                autocommit=True,
                charset="utf8mb4",
            )
        except pymysql.err.MySQLError as e:
            code = e.args[0] if e.args and isinstance(e.args[0], int) else None
            detail = e.args[1] if len(e.args) > 1 else str(e)
            raise ReplicationError(f"cannot connect: {detail}", code=code, source=self.label) from None


@dataclass(frozen=True)
class FilePosition:
    file: str
    position: int = 4


@dataclass(frozen=True)
class GtidStart:
    """Start after these GTIDs: a MySQL GTID set, or a MariaDB GTID position (``0-1-42,1-2-7``)."""

    gtids: str


Start = FilePosition | GtidStart | str  # or "oldest" (first binlog on the server) / "current" (its end)


@dataclass(slots=True)
class Reconnected:
    """The connection dropped (``reason``) and the stream continues from ``resume``: events after
    ``resume`` that were already delivered come again."""

    resume: ResumePoint
    reason: str


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionLostError):
        return True
    if isinstance(exc, ReplicationError):
        return exc.code in RETRYABLE_CODES
    if isinstance(exc, (OSError, EOFError)):  # socket errors and timeouts
        return True
    code = getattr(exc, "args", (None,))[0] if getattr(exc, "args", None) else None
    mod = type(exc).__module__
    return mod.startswith("pymysql") and (code in RETRYABLE_CODES or type(exc).__name__ == "InterfaceError")


def current_position(conn: Any) -> FilePosition:
    """The server's binlog end. MySQL 8.4 dropped SHOW MASTER STATUS for SHOW BINARY LOG STATUS;
    MariaDB and older MySQL know only the former: try each."""
    last: Exception | None = None
    for sql in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                row = cur.fetchone()
        except Exception as e:  # a syntax error on servers without this statement
            last = e
            continue
        if not row:
            raise ReplicationError("binary logging is off on this server (no binlog status)")
        return FilePosition(str(row[0]), int(row[1]))
    raise ReplicationError(f"cannot read the binlog status: {last}")


def binary_logs(conn: Any) -> list[tuple[str, int]]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(str(r[0]), int(r[1])) for r in cur.fetchall()]


@dataclass
class ReplicaClient:
    """Follow a server's binlog as a replica.

    ``events()`` yields every ``StreamEvent`` and, after a reconnect, a ``Reconnected`` marker;
    ``transactions()`` yields complete transactions only (a transaction cut by a dropped connection is
    received again whole). ``blocking=False`` stops at the server's current end.
    """

    server: ServerAddress
    start: Start = "current"
    server_id: int = field(default_factory=lambda: random.randint(1 << 30, (1 << 31) - 1))
    heartbeat: float = 5.0
    blocking: bool = True
    verify_checksum: bool = True
    reconnect: bool = True
    give_up_after: float = 300.0  # seconds of failed reconnects before the error is raised
    keep_events: bool = False
    on_connect: Callable[[Any], None] | None = None  # called with each new PyMySQL connection (tests)
    mariadb: bool = field(init=False, default=False)
    stream: ReplicationStream | None = field(init=False, default=None)
    _conn: Any = field(init=False, default=None)
    _reader: PacketReader = field(init=False, default_factory=PacketReader)

    # -- connection -------------------------------------------------------------------------

    def _query(self, sql: str) -> None:
        with self._conn.cursor() as cur:
            cur.execute(sql)

    def _send(self, payload: bytes) -> None:
        self._conn._sock.sendall(frame(payload, 0))

    def _recv(self) -> list[bytes]:
        while True:
            got = self._reader.payloads()
            if got:
                return got
            data = self._conn._rfile.read1(1 << 16)
            if not data:
                raise ConnectionLostError(
                    "the server closed the connection", source=self.server.label, offset=self._offset()
                )
            self._reader.feed(data)

    def _offset(self) -> int | None:
        return self.stream.position if self.stream is not None else None

    def _open(self, resume: ResumePoint | None) -> None:
        self.close()
        conn = self.server.connect()
        self._conn = conn
        if self.on_connect is not None:
            self.on_connect(conn)
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            self.mariadb = "mariadb" in str(cur.fetchone()[0]).lower()
        try:
            self._query("SET @master_binlog_checksum = @@global.binlog_checksum")
        except Exception:  # servers before checksums (5.5) have no such variable
            pass
        self._query(f"SET @master_heartbeat_period = {int(self.heartbeat * 1e9)}")
        if self.mariadb:
            self._query(f"SET @mariadb_slave_capability = {MARIA_CAPABILITY_GTID}")
        file, position, gtids, maria = self._where(resume)
        self._reader = PacketReader()
        self._send(register_slave(self.server_id, user=self.server.user, port=0))
        reply = self._recv()[0]
        if reply[:1] != bytes([OK]):
            err = parse_err(reply)
            hint = (
                f"; {self.server.user!r} needs the REPLICATION SLAVE privilege"
                f" (GRANT REPLICATION SLAVE ON *.* TO …)"
                if err.code in (1045, 1227)
                else ""
            )
            raise ReplicationError(
                f"the server refused this replica (COM_REGISTER_SLAVE): {err}{hint}",
                code=err.code,
                source=self.server.label,
            )
        exact = False
        flags = 0 if self.blocking else DUMP_NON_BLOCK
        if self.mariadb:
            flags |= MARIA_DUMP_ANNOTATE_ROWS
        if maria is not None and (resume is None or isinstance(self.start, GtidStart)):
            self._query(f"SET @slave_connect_state = '{maria}'")
            self._query("SET @slave_gtid_strict_mode = 0")
            self._query("SET @slave_gtid_ignore_duplicates = 0")
            self._send(binlog_dump(self.server_id, "", 4, flags))
        elif gtids is not None and isinstance(self.start, GtidStart):
            self._send(binlog_dump_gtid(self.server_id, encode_gtid_set(gtids), "", 4, flags))
        else:
            self._send(binlog_dump(self.server_id, file, position, flags))
            exact = True
        self.stream = ReplicationStream(
            file=file,
            position=position,
            server=self.server.label,
            verify_checksum=self.verify_checksum,
            keep_events=self.keep_events,
            exact=exact,
            gtids=gtids if gtids is not None else (None if self.mariadb else GtidSet()),
            maria_gtids=maria if maria is not None else (MariaGtidPos() if self.mariadb else None),
        )
        if self.blocking:
            conn._sock.settimeout(max(3 * self.heartbeat, 10.0))

    def _where(self, resume: ResumePoint | None) -> tuple[str, int, GtidSet | None, MariaGtidPos | None]:
        if resume is not None:
            return resume.file, resume.position, resume.gtids, resume.maria_gtids
        start = self.start
        if isinstance(start, FilePosition):
            return start.file, start.position, None, None
        if isinstance(start, GtidStart):
            if self.mariadb:
                return "", 4, None, MariaGtidPos.parse(start.gtids)
            return "", 4, GtidSet.parse(start.gtids), None
        if start == "oldest":
            logs = binary_logs(self._conn)
            if not logs:
                raise ReplicationError("the server has no binary logs", source=self.server.label)
            return logs[0][0], 4, None, None
        if start == "current":
            pos = current_position(self._conn)
            return pos.file, pos.position, None, None
        raise ValueError(f"unknown start {start!r}: a FilePosition, a GtidStart, 'oldest' or 'current'")

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    # -- reading ----------------------------------------------------------------------------

    def events(self) -> Iterator[StreamEvent | Reconnected]:
        resume: ResumePoint | None = None
        failing_since: float | None = None
        delay = 0.2
        while True:
            try:
                self._open(resume)
                assert self.stream is not None
                stream = self.stream
                while True:
                    for payload in self._recv():
                        item = stream.receive(payload)
                        if isinstance(item, EndOfStream):
                            if self.blocking:  # a server shutting down ends its dumps with EOF
                                raise ConnectionLostError(
                                    "the server ended the dump (shutting down?)",
                                    source=self.server.label,
                                    offset=item.position,
                                )
                            self.close()
                            return
                        failing_since, delay = None, 0.2
                        yield item
            except Exception as exc:
                self.close()
                never_connected = resume is None and self.stream is None
                if never_connected or not (self.reconnect and retryable(exc)):
                    raise  # a server never reached is a mistake to report, not an outage to wait out
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > self.give_up_after:
                    raise
                if self.stream is not None:
                    resume = self.stream.resume
                    self.stream = None
                if resume is not None:
                    yield Reconnected(resume, f"{type(exc).__name__}: {exc}")
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def transactions(self) -> Iterator[Transaction]:
        """Complete transactions in commit order; with ``keep_events`` each carries its events."""
        for item in self.events():
            if isinstance(item, StreamEvent) and self.stream is not None:
                yield from self.stream.take_transactions()

    def __enter__(self) -> ReplicaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def encode_gtid_set(gtids: GtidSet) -> bytes:
    """A GTID set in the binary layout of COM_BINLOG_DUMP_GTID (that of a PREVIOUS_GTIDS body)."""
    return encode_previous_gtids(PreviousGtids(gtids.as_dict()))
