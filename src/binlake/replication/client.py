"""The replica: connects to a server, asks for a binlog dump and feeds the packets to the sans-I/O
``ReplicationStream``; on a dropped connection or a restarted server it reconnects with backoff from
the last complete transaction, so consumers see no gap and no duplicate.

PyMySQL does the handshake and authentication only (caching_sha2_password, TLS); after the set-up
queries the client reads and writes the socket itself, with its own packet framing.
"""

from __future__ import annotations

import random
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
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


class SslMode(StrEnum):
    """The MySQL client's ``--ssl-mode``, weakest first."""

    DISABLED = "DISABLED"  # never TLS
    PREFERRED = "PREFERRED"  # TLS if the server offers it, else plain (not over a Unix socket)
    REQUIRED = "REQUIRED"  # TLS or fail; the certificate is not checked unless a CA is given
    VERIFY_CA = "VERIFY_CA"  # TLS, the server's certificate chain checked against ssl_ca
    VERIFY_IDENTITY = "VERIFY_IDENTITY"  # VERIFY_CA, and the certificate names the host connected to

    @classmethod
    def parse(cls, name: str | SslMode) -> SslMode:
        if isinstance(name, SslMode):
            return name
        try:
            return cls(name.upper().replace("-", "_"))
        except ValueError:
            raise ValueError(
                f"unknown --ssl-mode {name!r}: one of {', '.join(m.value for m in cls)}"
            ) from None

    @property
    def requires_tls(self) -> bool:
        return self in (SslMode.REQUIRED, SslMode.VERIFY_CA, SslMode.VERIFY_IDENTITY)


CR_SSL_CONNECTION_ERROR = 2026  # the MySQL client's code for TLS failures; not retried


@dataclass(frozen=True)
class ServerAddress:
    """Where and how to connect. TLS follows the MySQL client's ``--ssl-mode`` (``tls_mode``): unset,
    it is VERIFY_CA when ``ssl_ca`` is given and PREFERRED otherwise; a CA given with REQUIRED (or
    PREFERRED) is used to verify too, so a CA is never given for nothing. The password is left out of
    ``repr()``."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    unix_socket: str | None = None
    ssl_ca: str | None = None  # verify the server's certificate against this CA
    ssl_cert: str | None = None
    ssl_key: str | None = None
    ssl_disabled: bool = False  # the same as ssl_mode=DISABLED (``--no-ssl``)
    connect_timeout: float = 10.0
    ssl_mode: SslMode | str | None = None

    def __post_init__(self) -> None:
        if self.ssl_mode is not None:
            mode = SslMode.parse(self.ssl_mode)
            object.__setattr__(self, "ssl_mode", mode)
            if self.ssl_disabled and mode is not SslMode.DISABLED:
                raise ValueError(f"ssl_disabled contradicts ssl_mode {mode.value}")

    @property
    def label(self) -> str:
        return self.unix_socket or f"{self.host}:{self.port}"

    @property
    def tls_mode(self) -> SslMode:
        """The mode in force, after the defaults above."""
        if self.ssl_disabled:
            return SslMode.DISABLED
        mode = SslMode.parse(self.ssl_mode) if self.ssl_mode is not None else None
        if mode is None or (mode is SslMode.REQUIRED and self.ssl_ca):
            return SslMode.VERIFY_CA if self.ssl_ca else SslMode.PREFERRED
        return mode

    def tls_context(self) -> ssl.SSLContext:
        """The TLS settings of ``tls_mode``: the chain is checked whenever a CA is given (against that
        CA only, not the system's), the host name only for VERIFY_IDENTITY."""
        mode = self.tls_mode
        if mode in (SslMode.VERIFY_CA, SslMode.VERIFY_IDENTITY) and not self.ssl_ca:
            raise ReplicationError(
                f"--ssl-mode {mode.value} needs --ssl-ca (the CA that signed the server's certificate)",
                code=CR_SSL_CONNECTION_ERROR,
                source=self.label,
            )
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = mode is SslMode.VERIFY_IDENTITY
        if self.ssl_ca:
            ctx.load_verify_locations(cafile=self.ssl_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
            # Python 3.13's strict X.509 checks refuse the certificates MySQL generates for itself
            ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
        else:
            ctx.verify_mode = ssl.CERT_NONE
        if self.ssl_cert:
            ctx.load_cert_chain(self.ssl_cert, self.ssl_key)
        return ctx

    def connect(self, **options: Any) -> Any:
        """A PyMySQL connection with TLS as ``tls_mode`` says; its failures become one-line
        ``ReplicationError``s with the server's (or the client's) error code. ``options``: more
        of PyMySQL's (a snapshot reads with its own conversions)."""
        import pymysql

        mode = self.tls_mode
        try:
            ctx = self.tls_context() if mode is not SslMode.DISABLED else None
        except (OSError, ssl.SSLError) as e:  # an unreadable or malformed CA, certificate or key
            files = ", ".join(
                f"--{opt} {path}"
                for opt, path in (
                    ("ssl-ca", self.ssl_ca),
                    ("ssl-cert", self.ssl_cert),
                    ("ssl-key", self.ssl_key),
                )
                if path
            )
            raise ReplicationError(
                f"cannot load the TLS files ({files}): {getattr(e, 'strerror', None) or e}",
                code=CR_SSL_CONNECTION_ERROR,
                source=self.label,
            ) from None
        # PREFERRED does not encrypt a Unix socket, as in the MySQL client: the socket is local
        plain = mode is SslMode.DISABLED or (mode is SslMode.PREFERRED and self.unix_socket is not None)
        try:
            conn = pymysql.connect(
                host=self.host,
                port=self.port,
                user=self.user,
                password=self.password,
                unix_socket=self.unix_socket,
                ssl=ctx if mode.requires_tls else None,  # a context: PyMySQL insists on TLS
                ssl_disabled=plain,
                connect_timeout=self.connect_timeout,
                autocommit=True,
                charset="utf8mb4",
                defer_connect=True,
                **options,
            )
            if mode is SslMode.PREFERRED and not plain:
                conn.ctx = ctx  # PyMySQL's own PREFERRED (TLS when offered), with our checks
            conn.connect()
        except pymysql.err.MySQLError as e:
            raise self._connect_error(e, mode) from None
        except RuntimeError as e:  # PyMySQL's own: an auth method it cannot do here
            raise ReplicationError(f"cannot connect: {e}", source=self.label) from None
        if mode.requires_tls and not isinstance(conn._sock, ssl.SSLSocket):
            conn.close()  # never reached while PyMySQL keeps its promise; the dump must not go plain
            raise ReplicationError(
                f"cannot connect: --ssl-mode {mode.value} but the connection is not encrypted",
                code=CR_SSL_CONNECTION_ERROR,
                source=self.label,
            )
        return conn

    def _connect_error(self, e: Exception, mode: SslMode) -> ReplicationError:
        code = e.args[0] if e.args and isinstance(e.args[0], int) else None
        detail = e.args[1] if len(e.args) > 1 else str(e)
        cause = getattr(e, "original_exception", None)
        if isinstance(cause, ssl.SSLCertVerificationError):
            what = "host name" if "mismatch" in str(cause.verify_message) else "certificate"
            return ReplicationError(
                f"cannot connect: the server's TLS {what} was refused ({cause.verify_message};"
                f" --ssl-mode {mode.value}, --ssl-ca {self.ssl_ca})",
                code=CR_SSL_CONNECTION_ERROR,
                source=self.label,
            )
        if isinstance(cause, ssl.SSLError):
            return ReplicationError(
                f"cannot connect: TLS failed ({cause.reason or cause}; --ssl-mode {mode.value})",
                code=CR_SSL_CONNECTION_ERROR,
                source=self.label,
            )
        if code == CR_SSL_CONNECTION_ERROR:
            detail = f"the server does not offer TLS, which --ssl-mode {mode.value} requires"
        return ReplicationError(f"cannot connect: {detail}", code=code, source=self.label)


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
        name = row[0].decode() if isinstance(row[0], (bytes, bytearray)) else str(row[0])  # a raw conn
        return FilePosition(name, int(row[1]))
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
    decode_rows: bool = True  # False: rows events keep their bytes (statements-only passes)
    on_connect: Callable[[Any], None] | None = None  # called with each new PyMySQL connection (tests)
    # called with every decoded event, as a file reader's observers are (the schema tracker), on
    # every connection's stream
    observers: list[Callable[[Any], None]] = field(default_factory=list)
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
            decode_rows=self.decode_rows,
            exact=exact,
            gtids=gtids if gtids is not None else (None if self.mariadb else GtidSet()),
            maria_gtids=maria if maria is not None else (MariaGtidPos() if self.mariadb else None),
        )
        self.stream.decoder.state.observers.extend(self.observers)
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
