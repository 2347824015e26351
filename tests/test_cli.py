"""The ``binlake`` command: output formats, and one clear line (file, offset) with a non-zero exit
for bad input, after everything intact has been printed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "binlake.cli", *args], capture_output=True, timeout=120)


def test_dump_json_one_object_per_event(corpus: Path) -> None:
    path = corpus / "zalora-binlog-parser/gtid-fixtures/mysql-bin.01"
    res = run("dump", "--format", "json", str(path))
    assert res.returncode == 0, res.stderr
    objs = [json.loads(line) for line in res.stdout.decode().splitlines()]
    assert len(objs) == 60
    rows = [o for o in objs if o["type"].endswith("ROWS_V2")]
    assert rows and all(o["body"]["rows"] for o in rows)
    assert objs[0]["type"] == "FORMAT_DESCRIPTION" and objs[0]["offset"] == 4


def test_dump_text_positions(corpus: Path) -> None:
    path = corpus / "zalora-binlog-parser/fixtures/mysql-bin.01"
    res = run("dump", "--start-position", "197", "--stop-position", "428", str(path))
    at = [line for line in res.stdout.decode().splitlines() if line.startswith("# at ")]
    assert at == ["# at 4", "# at 197", "# at 258", "# at 397"]


@pytest.mark.parametrize(
    ("name", "kind", "offset"),
    [
        ("mysql-server-8.0.39/std_data/rpl_nogtid_encryption_master-bin.000002", "encrypted", 0),
        ("mysql-server-8.0.39/std_data/binlog_truncated_prev_gtid_event.000001", "incomplete tail", 120),
        ("mysql-server-8.0.39/std_data/binlog_recovery/duplicate_xid.000001", "CRC32 mismatch", None),
        ("mysql-server-8.0.39/std_data/corrupt-relay-bin.000624", "malformed QUERY", 91204),
        ("mariadb-server-10.3/std_data/binlog_before_20574.bin", "encrypted", 296),
    ],
)
def test_bad_input_is_one_clear_line(corpus: Path, name: str, kind: str, offset: int | None) -> None:
    path = corpus / name
    res = run("dump", str(path))
    err = res.stderr.decode()
    assert res.returncode == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"binlake: error: {path}") and kind in err
    if offset is not None:
        assert f"offset {offset}" in err
        printed = [int(line[5:]) for line in res.stdout.decode().splitlines() if line.startswith("# at ")]
        assert all(p < offset for p in printed)
        assert len(printed) >= (1 if offset else 0)


def test_not_a_binlog_and_missing_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"hello world")
    res = run("dump", str(junk))
    assert res.returncode == 2 and b"not a binlog file" in res.stderr and b"offset 0" in res.stderr
    res = run("dump", str(tmp_path / "nope"))
    assert res.returncode == 2 and b"No such file" in res.stderr and b"Traceback" not in res.stderr


def _cut_rotated(d: Path) -> str:
    first = d / "replicated-bin.000001"
    first.write_bytes(first.read_bytes()[:900])
    return f"{first}, offset 830: an event cut short at the end of the file"


def _foreign_symlink(d: Path) -> str:
    (d / "replicated-bin.000003").symlink_to("/etc/passwd")
    return f"{d}/replicated-bin.000003: a symlink to /etc/passwd, outside {d}"


def _not_a_binlog(d: Path) -> str:
    (d / "replicated-bin.000003").write_bytes(b"hello, this is not a binlog")
    (d / "replicated-bin.000004").write_bytes(b"\xfebin")
    return f"{d}/replicated-bin.000003, offset 0: not a binlog file"


def _missing(d: Path) -> str:
    shutil.rmtree(d)
    return f"missing binlog file(s): {d}"


@pytest.mark.parametrize("spoil", [_cut_rotated, _foreign_symlink, _not_a_binlog, _missing])
def test_sync_refuses_a_bad_source_in_one_line_before_spark_starts(
    corpus: Path, tmp_path: Path, spoil: Callable[[Path], str]
) -> None:
    """A real two-file series, spoiled one way: exit 2 and one line naming the file, in the time it
    takes to start Python (Spark's start alone takes tens of seconds)."""
    d = tmp_path / "bin"
    d.mkdir()
    for n in (1, 2):
        name = f"replicated-bin.00000{n}"
        shutil.copyfile(corpus / "mysql-server-8.0.39/std_data" / name, d / name)
    expected = spoil(d)
    started = time.monotonic()
    res = run("sync", str(d), "--to", f"delta:{tmp_path / 'lake'}")
    elapsed = time.monotonic() - started
    lines = res.stderr.decode().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr.decode()
    assert lines[0].startswith(f"binlake: error: {expected}"), lines[0]
    assert b"Traceback" not in res.stderr and not (tmp_path / "lake").exists()
    assert elapsed < 15, elapsed


def test_sync_keeps_target_passwords_out_of_urls_and_output(corpus: Path, tmp_path: Path) -> None:
    """A password in a JDBC URL is warned about and never printed; one from an environment
    variable or a file that is not there is one error line, before Spark starts."""
    source = str(corpus / "zalora-binlog-parser/fixtures/mysql-bin.01")
    url = "jdbc:mariadb://127.0.0.1:1/lake?user=etl&password=hunter2"
    started = time.monotonic()
    res = run("sync", source, "--to", url, "--to-password-env", "BINLAKE_TEST_UNSET_VARIABLE")
    err = res.stderr.decode()
    assert res.returncode == 2 and time.monotonic() - started < 30
    assert "hunter2" not in err + res.stdout.decode()
    assert "holds a password" in err and "BINLAKE_TEST_UNSET_VARIABLE is not set" in err
    res = run("sync", source, "--to", url.split("&")[0], "--to-password-file", str(tmp_path / "nope"))
    assert res.returncode == 2 and "cannot read the secret file" in res.stderr.decode()
    assert len(res.stderr.decode().strip().splitlines()) == 1


def test_dump_sql_and_stats_read_a_directory_as_its_series(corpus: Path, tmp_path: Path) -> None:
    """Newcomer 55: dump, sql and stats refused a directory where changes, index and find-position
    read it as its series; and sql printed its SET NAMES header before the error for a missing
    file, into what a user redirects to redo.sql. A directory reads as its files in order; a
    missing file is said before anything is printed."""
    std = corpus / "mysql-server-8.0.39/std_data"
    series = tmp_path / "series"
    series.mkdir()
    for n in (1, 2):
        (series / f"replicated-bin.00000{n}").write_bytes((std / f"replicated-bin.00000{n}").read_bytes())
    files = [str(series / f"replicated-bin.00000{n}") for n in (1, 2)]
    for command in (["dump"], ["stats"], ["dump", "--format", "json"]):
        by_dir, by_files = run(*command, str(series)), run(*command, *files)
        assert by_dir.returncode == by_files.returncode == 0, by_dir.stderr
        assert by_dir.stdout == by_files.stdout and len(by_dir.stdout) > 200
    res = run("sql", str(tmp_path / "nope"))
    assert res.returncode == 2 and res.stdout == b"" and b"nope: No such file" in res.stderr
