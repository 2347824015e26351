"""The sockets of ``binlake serve``: a listening TCP socket and one thread per connection, each
driving a ``Session`` (the protocol lives there). A connection that does not finish its handshake
in time, or stays silent between commands too long, is dropped; connections over the limit get
ERR 1040. While a dump waits for its files to grow the thread looks at the files every
``poll_interval`` seconds and at the socket for the client leaving."""

from __future__ import annotations

import itertools
import logging
import select
import socket
import threading
import time
from dataclasses import dataclass

from binlake.replication.packets import err_packet, frame
from binlake.serve.directory import BinlogDirectory
from binlake.serve.session import ServeConfig, Session

log = logging.getLogger("binlake.serve")
ER_CON_COUNT_ERROR = 1040


@dataclass(frozen=True)
class Limits:
    handshake_timeout: float = 10.0  # seconds to log in
    idle_timeout: float = 3600.0  # seconds between commands (not while a dump runs)
    poll_interval: float = 0.2  # seconds between looks at a waiting dump's files
    max_connections: int = 64
    send_timeout: float = 600.0  # a replica that reads nothing for this long is dropped


class BinlogServer:
    """``serve_forever()`` (or ``start()`` in a thread) until ``shutdown()``."""

    def __init__(
        self,
        directory: str,
        config: ServeConfig,
        host: str = "127.0.0.1",
        port: int = 3306,
        limits: Limits | None = None,
    ) -> None:
        self.directory = directory
        self.limits = limits or Limits()
        self._sock = socket.create_server((host, port), reuse_port=False)
        self.address: tuple[str, int] = self._sock.getsockname()[:2]
        self.config = ServeConfig(**{**config.__dict__, "port": self.address[1]})
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(self.limits.max_connections)
        self._ids = itertools.count(1)
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> BinlogServer:
        self._thread = threading.Thread(target=self.serve_forever, name="binlake-serve", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._sock.settimeout(self.limits.poll_interval)
        while not self._stop.is_set():
            try:
                conn, peer = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    break
                raise
            if not self._slots.acquire(blocking=False):
                self._refuse(conn)
                continue
            t = threading.Thread(target=self._serve, args=(conn, peer[0]), daemon=True)
            with self._lock:
                self._threads.add(t)
            t.start()

    def shutdown(self, wait: float = 5.0) -> None:
        self._stop.set()
        self._sock.close()
        if self._thread is not None:
            self._thread.join(wait)
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(wait)

    def __enter__(self) -> BinlogServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _refuse(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(1.0)
            conn.sendall(frame(err_packet(ER_CON_COUNT_ERROR, "Too many connections", "08004"), 0))
        except OSError:
            pass
        finally:
            conn.close()

    def _serve(self, conn: socket.socket, peer: str) -> None:
        session = Session(
            self.config, BinlogDirectory(self.directory), connection_id=next(self._ids), peer=peer
        )
        try:
            self._run(conn, session)
        except OSError as e:  # the client went away or stopped reading
            log.debug("connection from %s ended: %s", peer, e)
        except Exception:  # a bug must end this connection only, never the server
            log.exception("connection from %s failed", peer)
        finally:
            if session.dump is not None:
                session.dump.close()
            conn.close()
            self._slots.release()
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _run(self, conn: socket.socket, session: Session) -> None:
        limits = self.limits
        conn.settimeout(limits.send_timeout)
        deadline = time.monotonic() + limits.handshake_timeout
        self._flush(conn, session)
        while not session.closed and not self._stop.is_set():
            if session.dumping:
                sent = session.pump(time.monotonic())
                self._flush(conn, session)
                if not self._readable(conn, 0 if sent else limits.poll_interval):
                    continue
            else:
                if time.monotonic() > deadline:
                    return  # no login in time, or silent for too long between commands
                if not self._readable(conn, limits.poll_interval):
                    continue
            data = conn.recv(1 << 16)
            if not data:
                return
            session.receive(data)
            self._flush(conn, session)
            if session.authenticated:
                deadline = time.monotonic() + limits.idle_timeout
        self._flush(conn, session)

    @staticmethod
    def _readable(conn: socket.socket, timeout: float) -> bool:
        ready, _, _ = select.select([conn], [], [], timeout)
        return bool(ready)

    @staticmethod
    def _flush(conn: socket.socket, session: Session) -> None:
        data = session.data_to_send()
        if data:
            conn.sendall(data)
