"""`binlake mirror` and `binlake tail` on the command line, against a private MariaDB."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import binlake
from binlake.cli import main
from binlake.replication.client import FilePosition, ReplicaClient, ServerAddress, current_position

pytestmark = pytest.mark.slow
SECRET = "cli-s3cret"


@pytest.fixture(autouse=True)
def no_login_of_the_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's ~/.my.cnf and $MYSQL_PWD stay out of these tests."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("MYSQL_PWD", raising=False)


@pytest.fixture(scope="module")
def server(source_db: Any) -> Any:
    source_db.execute(
        "CREATE DATABASE c",
        "CREATE TABLE c.t (id INT PRIMARY KEY, j JSON, s VARCHAR(20))",
        """INSERT INTO c.t VALUES (1, '{"a": [1, 2.5, "x"]}', 'one'), (2, NULL, 'two')""",
        "FLUSH BINARY LOGS",
        "UPDATE c.t SET s = 'deux' WHERE id = 2",
        "DELETE FROM c.t WHERE id = 1",
        f"CREATE USER 'cli'@'%' IDENTIFIED BY '{SECRET}'",
        "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cli'@'%'",
    )
    return source_db


def option_file(path: Path, **options: object) -> Path:
    path.write_text("[client]\n" + "".join(f"{k.replace('_', '-')} = {v}\n" for k, v in options.items()))
    path.chmod(0o600)
    return path


def tcp_args(server: Any) -> list[str]:
    return ["--host", "127.0.0.1", "--port", str(server.port), "--user", "cli", "--non-blocking"]


def mirrored_as_the_server(argv: list[str], server: Any, target: Path) -> None:
    """Run ``binlake mirror`` until its copy equals the server's files. MariaDB writes a binlog
    checkpoint event into the new file some time after a rotation, so a run may end before the
    server's last event: every run's copy must then be a prefix of the file, and the next run
    continues it."""
    for _ in range(50):
        assert main(argv) == 0
        files = server.binlog_files()
        copies = [(target / f.name).read_bytes() if (target / f.name).exists() else b"" for f in files]
        originals = [f.read_bytes() for f in files]
        assert all(o.startswith(c) for c, o in zip(copies, originals, strict=True))
        if copies == originals:
            return
        time.sleep(0.1)
    raise AssertionError("the mirror never caught up with the server's files")


def test_mirror_cli_copies_and_continues(server: Any, tmp_path: Path, capsys: Any) -> None:
    target = tmp_path / "m"
    argv = ["mirror", "--socket", server.socket, "--to", str(target), "--non-blocking"]
    mirrored_as_the_server(argv, server, target)
    server.execute("INSERT INTO c.t VALUES (3, '[]', 'three')")
    mirrored_as_the_server(argv, server, target)  # a later run continues the mirror
    assert "mirrored" in capsys.readouterr().err


def test_tail_prints_what_dump_prints_for_the_files(server: Any, capsys: Any) -> None:
    first = server.binlog_files()[0].name
    assert (
        main(["tail", "--socket", server.socket, "--start-file", first, "--non-blocking", "--format", "json"])
        == 0
    )
    tailed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["dump", "--format", "json", *map(str, server.binlog_files())]) == 0
    dumped = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for d in dumped:
        d["file"] = Path(d["file"]).name
    for e in tailed + dumped:  # the dump sends the active file's FORMAT_DESCRIPTION without "in use"
        if e["type"] == "FORMAT_DESCRIPTION":
            e["flags"] &= ~1
    assert tailed == dumped
    assert any(e["type"] == "UPDATE_ROWS_V1" for e in tailed)


def test_tail_text_from_the_current_end_shows_nothing_old(server: Any, capsys: Any) -> None:
    assert main(["tail", "--socket", server.socket, "--non-blocking"]) == 0
    assert "INSERT INTO" not in capsys.readouterr().out


class _Cursor:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers, self.row = answers, None

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str) -> None:
        answer = self.answers[sql]
        if isinstance(answer, Exception):
            raise answer
        self.row = answer

    def fetchone(self) -> Any:
        return self.row


class _Conn:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def cursor(self) -> _Cursor:
        return _Cursor(self.answers)


def test_binlog_status_of_mysql_8_4_and_of_older_servers() -> None:
    """MySQL 8.4 removed SHOW MASTER STATUS; MariaDB and MySQL before 8.2 lack SHOW BINARY LOG STATUS."""
    mysql84 = _Conn({"SHOW BINARY LOG STATUS": ("binlog.000009", 1234, "", "", "")})
    assert current_position(mysql84) == FilePosition("binlog.000009", 1234)
    older = _Conn({"SHOW BINARY LOG STATUS": RuntimeError("syntax"), "SHOW MASTER STATUS": ("m.000002", 77)})
    assert current_position(older) == FilePosition("m.000002", 77)


def test_option_file_gives_login_and_tls_and_no_file_keeps_the_password(
    server: Any, tmp_path: Path, capsys: Any
) -> None:
    if server.pki is None:
        pytest.skip("openssl is not installed")
    login = {"user": "cli", "password": SECRET, "host": "127.0.0.1", "port": server.port}
    good = option_file(tmp_path / "good.cnf", **login, ssl_mode="verify_identity", ssl_ca=server.pki.ca)
    target = tmp_path / "m"
    assert main(["mirror", "--defaults-file", str(good), "--to", str(target), "--non-blocking"]) == 0
    assert (target / server.binlog_files()[0].name).exists()
    index = next(target.glob("*.index"))
    assert SECRET.encode() not in index.read_bytes()
    # the binlogs hold what the server logged (MariaDB logs CREATE USER … IDENTIFIED BY in clear):
    # like the server's own, the mirror's files are not for every user
    assert all(f.stat().st_mode & 0o007 == 0 for f in [target, *target.iterdir()])
    capsys.readouterr()
    bad = option_file(tmp_path / "bad.cnf", **login, ssl_ca=server.pki.other_ca)
    assert main(["tail", "--defaults-file", str(bad), "--non-blocking"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"binlake: error: 127.0.0.1:{server.port}: cannot connect:"
    )
    assert "TLS certificate was refused" in err and SECRET not in err
    # the command line wins over the file: --ssl-mode DISABLED does not look at the bad CA
    assert main(["tail", "--defaults-file", str(bad), "--ssl-mode", "disabled", "--non-blocking"]) == 0


def test_password_precedence_on_the_command_line(
    server: Any, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = Path(os.environ["HOME"])
    option_file(home / ".my.cnf", password="wrong-from-file")
    monkeypatch.setenv("MYSQL_PWD", SECRET)
    assert main(["tail", *tcp_args(server)]) == 2  # ~/.my.cnf wins over MYSQL_PWD
    err = capsys.readouterr().err
    assert "Access denied for user 'cli'" in err and "wrong-from-file" not in err
    assert main(["tail", "--no-defaults", *tcp_args(server)]) == 0  # without the file: MYSQL_PWD
    assert main(["tail", *tcp_args(server), "--password", SECRET]) == 0  # the command line wins over both
    assert "seen by other users (ps)" in capsys.readouterr().err
    monkeypatch.delenv("MYSQL_PWD")
    other = option_file(tmp_path / "other.cnf", password=SECRET)
    assert main(["tail", "--defaults-file", str(other), *tcp_args(server)]) == 0  # instead of ~/.my.cnf


def test_a_prompt_without_a_terminal_fails_at_once(server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(SECRET + "\n"))  # a pipe: never read as a password
    with pytest.raises(SystemExit) as e:
        main(["tail", "-p", *tcp_args(server)])
    assert str(e.value) == (
        "binlake tail: -p asks for the password, but stdin is not a terminal: "
        "give it with MYSQL_PWD or an option file (--defaults-file)"
    )


def test_the_prompt_on_a_terminal(server: Any) -> None:
    """``binlake tail -p`` in a real pseudo-terminal: it asks, reads without echo and connects."""
    env = {**os.environ, "PYTHONPATH": str(Path(binlake.__file__).parents[1])}
    argv = [sys.executable, "-m", "binlake.cli", "tail", "-p", "--no-defaults", *tcp_args(server)]
    pid, fd = pty.fork()
    if pid == 0:  # the child: its controlling terminal is the pty
        os.execve(sys.executable, argv, env)
    out, sent, deadline = b"", False, time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child has exited and closed the terminal
                break
            if not chunk:
                break
            out += chunk
            if not sent and b"Enter password: " in out:
                os.write(fd, SECRET.encode() + b"\n")
                sent = True
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert sent, out
    assert os.waitstatus_to_exitcode(status) == 0, out
    assert SECRET.encode() not in out  # not echoed


def test_no_password_in_reprs() -> None:
    address = ServerAddress(password=SECRET)
    assert SECRET not in repr(address) and SECRET not in repr(ReplicaClient(address))
    assert address.password == SECRET


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_mirror_stopped_by_a_signal_prints_its_summary(server: Any, tmp_path: Path, signum: int) -> None:
    """A following mirror stopped by a service manager (SIGTERM) or Ctrl-C: its summary line, exit 0,
    no traceback — and what it had mirrored is there."""
    target = tmp_path / "m"
    argv = ["mirror", "--no-defaults", "--socket", server.socket, "--to", str(target)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "binlake.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    last = server.binlog_files()[-1]
    deadline = time.monotonic() + 30
    while not ((target / last.name).exists() and (target / last.name).stat().st_size >= last.stat().st_size):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signum)
    # generous: the mirror fsyncs its file before the summary, slow on a disk shared with other jobs
    out, err = proc.communicate(timeout=120)
    text = err.decode()
    assert proc.returncode == 0, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert text.strip().splitlines()[-1].startswith("binlake: mirrored ") and "(stopped)" in text, text
