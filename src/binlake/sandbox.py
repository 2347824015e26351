"""Private MariaDB and MySQL servers in a directory of their own, for tests, the demo and benchmarks.

Never touches the system server: its own datadir, socket, pid file and a free loopback port. MariaDB
comes from Debian; MySQL from ``scripts/fetch-mysql`` (Debian sid's packages unpacked privately).
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar

DEFAULT_SETTINGS: dict[str, str] = {
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "server_id": "1",
    "character_set_server": "utf8mb4",
    "collation_server": "utf8mb4_general_ci",
    "max_binlog_size": "1073741824",
    "innodb_buffer_pool_size": "64M",
    "innodb_log_file_size": "48M",
    "skip_name_resolve": "ON",
}


def mariadb_available() -> bool:
    return shutil.which("mariadbd") is not None or os.path.exists("/usr/sbin/mariadbd")


PORT_ATTEMPTS = 5
T = TypeVar("T")


class PortTaken(RuntimeError):
    """The server could not bind the port chosen for it: someone took it after it was chosen."""


def _moving_off_taken_ports(server: Any, start: Callable[[], T], *, move: bool = True) -> T:
    """``start()``; where it raises ``PortTaken`` (the port chosen was taken before the server bound
    it: another server starting beside it, an outgoing connection's port), again on a new
    ``server.port``, up to ``PORT_ATTEMPTS`` starts. ``move`` False: a restart, which keeps its port."""
    for attempt in range(PORT_ATTEMPTS):
        try:
            return start()
        except PortTaken:
            if not move or attempt == PORT_ATTEMPTS - 1:
                raise
            server.port = _free_port()
    raise AssertionError("unreachable")


def _written_since(log: Path, offset: int) -> str:
    """What a server wrote to its log after ``offset`` (nothing when it wrote no log)."""
    if not log.exists():
        return ""
    with open(log, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateServer:
    """Start with ``start()`` (or as a context manager); ``connect()`` gives a PyMySQL connection.
    A subclass says how its server is initialized and run, and what its config section is named."""

    SECTION = ""
    BINLOG_BASE = ""
    DEFAULTS: dict[str, str] = {}

    def __init__(self, root: str | os.PathLike[str], **settings: str) -> None:
        self.root = Path(root).resolve()
        self.settings = {**self.DEFAULTS, **settings}
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = False  # once it ran, its port is known to others: a restart keeps it

    @property
    def socket(self) -> str:
        return str(self.root / "mysqld.sock")

    @property
    def binlog_dir(self) -> Path:
        return self.root / "binlog"

    def _write_config(self) -> Path:
        self.binlog_dir.mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)
        lines = [
            f"[{self.SECTION}]",
            f"datadir={self.root / 'data'}",
            f"socket={self.socket}",
            f"pid-file={self.root / 'mysqld.pid'}",
            f"port={self.port}",
            "bind-address=127.0.0.1",
            f"user={getpass.getuser()}",
            f"log_bin={self.binlog_dir / self.BINLOG_BASE}",
            f"log_error={self.root / 'error.log'}",
            # its own temporary files (internal temporary tables) beside its data: a shared /tmp
            # is cleaned by others (a query failed with its temporary table's file deleted)
            f"tmpdir={self.root / 'tmp'}",
        ] + [f"{k}={v}" for k, v in self.settings.items()]
        cnf = self.root / "my.cnf"
        cnf.write_text("\n".join(lines) + "\n")
        return cnf

    def _initialize(self, cnf: Path) -> None:
        raise NotImplementedError

    def _server_command(self, cnf: Path) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 60.0) -> Self:
        """Start and wait until it accepts connections. A first start whose port was taken between
        choosing it and the server's bind (another server starting beside it, an outgoing
        connection's port) starts again on a new port; a restart keeps its port, as promised. A
        first start is this object's (its port is the one it chose), even on a datadir that ran before."""
        return _moving_off_taken_ports(self, lambda: self._start(timeout), move=not self.started)

    def _start(self, timeout: float) -> Self:
        self.root.mkdir(parents=True, exist_ok=True)
        cnf = self._write_config()
        if not (self.root / "data" / "mysql").exists():
            self._initialize(cnf)
        error_log = self.root / "error.log"
        seen = error_log.stat().st_size if error_log.exists() else 0  # this start's lines follow
        self.proc = subprocess.Popen(
            self._server_command(cnf),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        fresh = not (self.root / "initialized").exists()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = _written_since(error_log, seen)[-2000:]
                if "Address already in use" in log:
                    raise PortTaken(f"port {self.port} is taken: {log}")
                raise RuntimeError(f"the server exited: {log}")
            try:
                self.connect().close()
            except Exception:
                time.sleep(0.2)
                continue
            if fresh:
                self._first_start()
                (self.root / "initialized").touch()
            self.started = True
            return self
        raise RuntimeError("the server did not accept connections in time")

    def _first_start(self) -> None:
        """What a new server needs once it runs (nothing here)."""

    def restart(self, **changes: str | None) -> Self:
        """Stop, change settings (None removes one) and start again: same datadir, same port."""
        self.stop()
        for key, value in changes.items():
            if value is None:
                self.settings.pop(key, None)
            else:
                self.settings[key] = value
        return self.start()

    def connect(self, database: str | None = None, **kw: Any) -> Any:
        import pymysql

        return pymysql.connect(
            unix_socket=self.socket, user="root", database=database, charset="utf8mb4", autocommit=True, **kw
        )

    def execute(self, *statements: str, database: str | None = None) -> None:
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql)
        finally:
            conn.close()

    def flush_binlogs(self) -> list[Path]:
        """Rotate so every event so far sits in a closed file; returns the binlog files in order."""
        self.execute("FLUSH BINARY LOGS")
        return self.binlog_files()

    def binlog_files(self) -> list[Path]:
        index = self.binlog_dir / f"{self.BINLOG_BASE}.index"
        names = [line.strip() for line in index.read_text().splitlines() if line.strip()]
        return [Path(n) if os.path.isabs(n) else self.binlog_dir / Path(n).name for n in names]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PrivateMariaDB(PrivateServer):
    SECTION = "mariadbd"
    BINLOG_BASE = "mariadb-bin"
    DEFAULTS = DEFAULT_SETTINGS

    def _initialize(self, cnf: Path) -> None:
        subprocess.run(
            [
                "mariadb-install-db",
                f"--defaults-file={cnf}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            check=True,
            capture_output=True,
        )

    def _server_command(self, cnf: Path) -> list[str]:
        return ["mariadbd", f"--defaults-file={cnf}"]


def mysql_home() -> Path:
    """Where ``scripts/fetch-mysql`` put MySQL (``$BINLAKE_MYSQL``, else ~/.cache/binlake/mysql)."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "binlake" / "mysql"
    return Path(os.environ.get("BINLAKE_MYSQL") or default)


def mysql_available() -> bool:
    home = mysql_home()
    return (home / "ready").exists() and (home / "bin" / "mysqld").exists()


MYSQL_SETTINGS: dict[str, str] = {
    "binlog_row_metadata": "FULL",
    "server_id": "1",
    "gtid_mode": "ON",
    "enforce_gtid_consistency": "ON",
    "character_set_server": "utf8mb4",
    "max_binlog_size": "1073741824",
    "innodb_buffer_pool_size": "64M",
    "innodb_redo_log_capacity": "64M",
    "skip_name_resolve": "ON",
    "mysqlx": "OFF",
}


class PrivateMySQL(PrivateServer):
    """A MySQL server (9.x, Debian sid's) run from ``mysql_home()``, GTIDs on, full row metadata."""

    SECTION = "mysqld"
    BINLOG_BASE = "binlog"
    DEFAULTS = MYSQL_SETTINGS

    def _write_config(self) -> Path:
        root = mysql_home() / "root" / "usr"
        self.settings.setdefault("basedir", str(root))
        self.settings.setdefault("lc_messages_dir", str(root / "share" / "mysql"))
        self.settings.setdefault("plugin_dir", str(root / "lib" / "mysql" / "plugin"))
        self.settings.setdefault("secure_file_priv", str(self.root))
        return super()._write_config()

    def _initialize(self, cnf: Path) -> None:
        subprocess.run(
            [str(mysql_home() / "bin" / "mysqld"), f"--defaults-file={cnf}", "--initialize-insecure"],
            check=True,
            capture_output=True,
        )

    def _server_command(self, cnf: Path) -> list[str]:
        return [str(mysql_home() / "bin" / "mysqld"), f"--defaults-file={cnf}"]

    def _first_start(self) -> None:
        # --initialize makes root@localhost only: with skip_name_resolve, TCP clients come from
        # 127.0.0.1 (MariaDB's install makes that account itself)
        self.execute(
            "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''",
            "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
        )


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL server binaries (Debian keeps them per major version)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


class PrivatePostgres:
    """A private PostgreSQL (trust auth, loopback port, own data dir) for the JDBC sink's tests.

    PostgreSQL refuses to run as root: as root the server runs as the ``postgres`` user the package
    created, in a directory handed to it."""

    def __init__(self) -> None:
        import tempfile

        self.root = Path(tempfile.mkdtemp(prefix="binlake-pg-"))
        self.port = _free_port()
        self.user = "binlake"

    def _run(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run([*prefix, *cmd], check=True, capture_output=True, text=True)

    @property
    def url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/postgres?user={self.user}"

    def start(self) -> PrivatePostgres:
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise RuntimeError(
                "PostgreSQL is not installed (apt-get install postgresql; ./dev setup does it)"
            )
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        data = self.root / "data"
        self._run(
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            self.user,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
        )
        log = self.root / "log"

        def start() -> PrivatePostgres:
            seen = log.stat().st_size if log.exists() else 0
            opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            try:
                self._run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w", "start")
            except subprocess.CalledProcessError as e:
                written = _written_since(log, seen)
                if "Address already in use" in written:
                    raise PortTaken(f"port {self.port} is taken: {written[-2000:]}") from e
                raise
            return self

        return _moving_off_taken_ports(self, start)

    def psql(self, sql: str) -> str:
        """Run SQL with psql; rows as tab-separated lines."""
        bin_dir = postgres_bin()
        assert bin_dir is not None
        out = subprocess.run(
            [
                str(bin_dir / "psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                self.user,
                "-d",
                "postgres",
                "-AtF",
                "\t",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout

    def stop(self) -> None:
        bin_dir = postgres_bin()
        if bin_dir is not None and (self.root / "data" / "postmaster.pid").exists():
            self._run(str(bin_dir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
