"""A private MariaDB server in a directory of its own, for tests, the demo and benchmarks.

Never touches the system server: its own datadir, socket, pid file and a free loopback port.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateMariaDB:
    """Start with ``start()`` (or as a context manager); ``connect()`` gives a PyMySQL connection."""

    def __init__(self, root: str | os.PathLike[str], **settings: str) -> None:
        self.root = Path(root).resolve()
        self.settings = {**DEFAULT_SETTINGS, **settings}
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> str:
        return str(self.root / "mysqld.sock")

    @property
    def binlog_dir(self) -> Path:
        return self.root / "binlog"

    def _write_config(self) -> Path:
        self.binlog_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            "[mariadbd]",
            f"datadir={self.root / 'data'}",
            f"socket={self.socket}",
            f"pid-file={self.root / 'mysqld.pid'}",
            f"port={self.port}",
            "bind-address=127.0.0.1",
            f"user={getpass.getuser()}",
            f"log_bin={self.binlog_dir / 'mariadb-bin'}",
            f"log_error={self.root / 'error.log'}",
        ] + [f"{k}={v}" for k, v in self.settings.items()]
        cnf = self.root / "my.cnf"
        cnf.write_text("\n".join(lines) + "\n")
        return cnf

    def start(self, timeout: float = 60.0) -> PrivateMariaDB:
        self.root.mkdir(parents=True, exist_ok=True)
        cnf = self._write_config()
        if not (self.root / "data" / "mysql").exists():
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
        self.proc = subprocess.Popen(
            ["mariadbd", f"--defaults-file={cnf}"],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited: {(self.root / 'error.log').read_text()[-2000:]}")
            try:
                self.connect().close()
                return self
            except Exception:
                time.sleep(0.2)
        raise RuntimeError("mariadbd did not accept connections in time")

    def restart(self, **changes: str | None) -> PrivateMariaDB:
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
        index = self.binlog_dir / "mariadb-bin.index"
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

    def __enter__(self) -> PrivateMariaDB:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(bin_dir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(self.root / "log"), "-w", "start"
        )
        return self

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
