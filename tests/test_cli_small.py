"""Small things a user hit (issue #15, item 7): schema output that loads back, --at and
--start-position refused clearly, a hint to --schema, full-width tables and progress bars only for
a person at a terminal, a current `demo --help`."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from binlake.cli import main
from binlake.generate import generate
from binlake.schema import SchemaHistory

MARIA = "mariadb-server-10.3/std_data/rpl/master-bin-seq_10.3.36.000001"  # events at 4, 256, 285, 329 …


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two MySQL 5.7 files (no column names in the binlog): the tables are created in the first."""
    return generate(
        tmp_path_factory.mktemp("s") / "bin",
        seed=3,
        target_bytes=30_000,
        max_file_size=15_000,
        flavor="mysql57",
    )


def run(*args: str, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "binlake.cli", *args], capture_output=True, timeout=120, **kw
    )


SEED = """CREATE DATABASE shop DEFAULT CHARACTER SET latin1;
USE shop;
CREATE TABLE t (id INT UNSIGNED NOT NULL, s SMALLINT UNSIGNED, ts TIMESTAMP(3) NULL, d DECIMAL(10,2) UNSIGNED,
  e ENUM('a','it''s','back\\\\slash') NOT NULL, st SET('x','y'), v VARCHAR(20) CHARACTER SET utf8mb4,
  bl BLOB, j JSON, PRIMARY KEY (id)) DEFAULT CHARSET=latin1;
"""


def test_schema_prints_mysql_ddl_that_loads_back_to_the_same_tables(
    series: Any, tmp_path: Path, capsys: Any
) -> None:
    seed = SchemaHistory.from_ddl_script(SEED)
    printed = ";\n".join(t.ddl() for t in seed.catalog.values())
    for sqlglot_name in ("USMALLINT", "UINT", "UDECIMAL", "TIMESTAMPTZ"):
        assert sqlglot_name not in printed
    again = SchemaHistory.from_ddl_script(printed)
    assert not again.not_understood and again.catalog == seed.catalog

    assert main(["schema", str(series.files[0].parent)]) == 0
    out = tmp_path / "schema.sql"
    out.write_text(capsys.readouterr().out)
    loaded = SchemaHistory.open(out)
    assert not loaded.not_understood and len(loaded.catalog) == 3
    assert main(["schema", str(series.files[0].parent), "--schema", str(out)]) == 0


def test_a_seed_that_does_not_parse_is_an_error(series: Any, tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE TABLE a.b (x USMALLINT);\n")
    for command in ("schema", "dump"):
        assert main([command, str(series.files[0]), "--schema", str(bad)]) == 2
        err = capsys.readouterr().err
        assert "1 statement(s) not understood" in err and "CREATE TABLE a.b" in err


@pytest.mark.parametrize(
    ("at", "says"),
    [
        ("binlog.000001", "--at takes FILE:POSITION"),
        ("nosuch:4", "nosuch is not a file of the series"),
        ("binlog.000001:99999999", "binlog.000001 has"),
    ],
)
def test_schema_at_a_position_that_is_not_there(series: Any, capsys: Any, at: str, says: str) -> None:
    assert main(["schema", str(series.files[0].parent), "--at", at]) == 2
    assert says in capsys.readouterr().err


def test_schema_at_the_start_shows_no_table_yet(series: Any, capsys: Any) -> None:
    assert main(["schema", str(series.files[0].parent), "--at", "binlog.000001:4"]) == 0
    assert "CREATE TABLE" not in capsys.readouterr().out


def test_a_start_position_inside_an_event_names_the_event_starts(corpus: Path, capsys: Any) -> None:
    path = str(corpus / MARIA)
    assert main(["dump", "--start-position", "300", path]) == 2
    assert "300 is not the start of an event: the nearest are 285 and 329" in capsys.readouterr().err
    assert main(["dump", "--start-position", "99999", path]) == 2
    assert "99999 is past the end of the file (1,245 bytes)" in capsys.readouterr().err
    assert main(["dump", "--start-position", "329", path]) == 0
    assert "# at 329" in capsys.readouterr().out


def test_sql_without_column_names_points_to_schema(series: Any, capsys: Any) -> None:
    assert main(["sql", str(series.files[1])]) == 2  # its tables were created in the first file
    assert "--schema FILE" in capsys.readouterr().err


def test_piped_tables_keep_long_paths_whole(corpus: Path, tmp_path: Path) -> None:
    name = "a-binlog-file-with-a-name-long-enough-that-an-80-column-table-would-cut-it." + "0" * 20 + "1"
    (tmp_path / name).write_bytes((corpus / MARIA).read_bytes())
    res = run("index", str(tmp_path / name))
    assert res.returncode == 0, res.stderr
    assert name in res.stdout.decode()


def on_terminal(args: list[str], *, stdout_piped: bool) -> tuple[bytes, bytes]:
    """Run the CLI with stderr (and stdin) on a pseudo-terminal; stdout on it too or on a pipe.
    Returns (what the terminal showed, what the pipe got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "binlake.cli", *args],
        stdin=slave,
        stdout=subprocess.PIPE if stdout_piped else slave,
        stderr=slave,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        shown += chunk
    piped = proc.stdout.read() if proc.stdout else b""
    assert proc.wait(timeout=120) == 0
    os.close(master)
    return shown, piped


def test_progress_on_a_terminal_only(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    shown, _ = on_terminal(["generate", str(out), "--size", "3MB"], stdout_piped=False)
    assert b"generating" in shown
    shown, _ = on_terminal(["stats", str(out / "binlog.000001")], stdout_piped=False)
    assert b"reading 1 file(s)" in shown
    # stdout to a pipe: another program reads it; nothing is drawn on the terminal
    shown, piped = on_terminal(["stats", str(out / "binlog.000001")], stdout_piped=True)
    assert b"reading" not in shown and b"binlog statistics" in piped
    res = run("dump", str(out / "binlog.000001"))
    assert res.returncode == 0 and res.stderr == b""


def test_demo_help_says_what_demo_does() -> None:
    text = run("demo", "--help").stdout.decode()
    assert "Delta" in text and "truth" in text and "MariaDB" not in text


def test_a_start_position_past_the_last_event_names_where_the_events_end(
    corpus: Path, tmp_path: Path
) -> None:
    """Inside the file but past its last whole event (a torn tail): the reader says where the events end."""
    from binlake.errors import NotAnEventStartError
    from binlake.reader import BinlogReader

    data = (corpus / MARIA).read_bytes()
    torn = tmp_path / "torn.000001"
    torn.write_bytes(data + b"\0" * 30)
    with pytest.raises(NotAnEventStartError, match=f"past the last event \\(the events end at {len(data)}\\)"):
        list(BinlogReader(torn, start_position=len(data) + 20))


@pytest.mark.parametrize("start", [5, 100, 255])
def test_a_start_position_inside_the_format_description_is_refused(
    corpus: Path, capsys: Any, start: int
) -> None:
    """Newcomer: `binlake dump --start-position 100 replicated-bin.000001` (its FORMAT_DESCRIPTION
    runs from 4 to 126) printed the file from 126 on with exit 0, though 100 is no event's start; 127
    is refused. The README: "A `--start-position` that is not an event start is refused naming the
    nearest event starts." Here the FORMAT_DESCRIPTION runs from 4 to 256."""
    path = str(corpus / MARIA)
    assert main(["dump", "--start-position", str(start), path]) == 2
    out, err = capsys.readouterr()
    assert f"{start} is not the start of an event: the nearest are 4 and 256" in err
    assert out == ""  # refused before the FORMAT_DESCRIPTION is printed
