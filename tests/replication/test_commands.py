"""`binlake mirror` and `binlake tail` on the command line, against a private MariaDB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from binlake.cli import main
from binlake.replication.client import FilePosition, current_position

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(source_db: Any) -> Any:
    source_db.execute(
        "CREATE DATABASE c",
        "CREATE TABLE c.t (id INT PRIMARY KEY, j JSON, s VARCHAR(20))",
        """INSERT INTO c.t VALUES (1, '{"a": [1, 2.5, "x"]}', 'one'), (2, NULL, 'two')""",
        "FLUSH BINARY LOGS",
        "UPDATE c.t SET s = 'deux' WHERE id = 2",
        "DELETE FROM c.t WHERE id = 1",
    )
    return source_db


def test_mirror_cli_copies_and_continues(server: Any, tmp_path: Path, capsys: Any) -> None:
    target = tmp_path / "m"
    argv = ["mirror", "--socket", server.socket, "--to", str(target), "--non-blocking"]
    assert main(argv) == 0
    for f in server.binlog_files():
        assert (target / f.name).read_bytes() == f.read_bytes()
    server.execute("INSERT INTO c.t VALUES (3, '[]', 'three')")
    assert main(argv) == 0  # the second run continues the mirror
    for f in server.binlog_files():
        assert (target / f.name).read_bytes() == f.read_bytes()
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
