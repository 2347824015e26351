"""Bad input × every command that takes it: each exits 2 with one or two lines on stderr, and never
a Python traceback or a Spark/py4j/Java stack. Commands that start Spark are only given input that
fails before Spark starts (the check must come first: that is what keeps these fast)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

BINLOG = "blackbeam-rust_mysql_common/json.binlog.000001"  # one whole MySQL 8.0 binlog, 4 KB
STACKS = ("Traceback", "py4j", "at org.", "at java.", "Exception in thread", "Caused by:")


@pytest.fixture(scope="module")
def bad(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The bad inputs by name (paths as strings, for ``str.format`` of the command lines)."""
    root = tmp_path_factory.mktemp("bad")
    whole = (corpus / BINLOG).read_bytes()
    (root / "empty").mkdir()
    (root / "notes.000001").write_text("not a binlog\n" * 50)
    (root / "badmagic.000001").write_bytes(b"\xfebix" + whole[4:])
    (root / "cut.000001").write_bytes(whole[: len(whole) // 2])  # ends inside an event
    series = root / "cutseries"  # a rotated file cut short, then a later file: can never be read whole
    series.mkdir()
    (series / "bin.000001").write_bytes(whole[: len(whole) // 2])
    (series / "bin.000002").write_bytes(whole)
    for name in ("notbinlogdir", "badmagicdir"):
        (root / name).mkdir()
    shutil.copy(root / "notes.000001", root / "notbinlogdir/bin.000001")
    shutil.copy(root / "badmagic.000001", root / "badmagicdir/bin.000001")
    good = root / "good"
    good.mkdir()
    (good / "bin.000001").write_bytes(whole)
    (root / "afile").write_text("a file where a directory belongs\n")
    return {
        "missing": str(root / "missing.000001"),
        "missingdir": str(root / "nothing-here"),
        "empty": str(root / "empty"),
        "notes": str(root / "notes.000001"),
        "notbinlogdir": str(root / "notbinlogdir"),
        "badmagic": str(root / "badmagic.000001"),
        "badmagicdir": str(root / "badmagicdir"),
        "cut": str(root / "cut.000001"),
        "cutseries": str(series),
        "good": str(good),
        "goodfile": str(good / "bin.000001"),
        "afile": str(root / "afile"),
        "out": str(root / "out"),
    }


FILE_INPUTS = ["{missing}", "{empty}", "{notes}", "{badmagic}", "{cut}"]
SERIES_INPUTS = ["{missing}", "{empty}", "{notbinlogdir}", "{badmagicdir}", "{cutseries}"]
BAD_OPTIONS = [  # options of dump, sql and stats (the selection), given to a good file
    "--start-position abc",
    "--start-position -1",
    "--start-position 130",  # inside the FORMAT_DESCRIPTION event, not an event start
    "--start-position 999999",  # past the end
    "--start-datetime 2024-13-45",
    "--stop-datetime yesterday",
    "--include-gtids nonsense",
    "--exclude-gtids 3E11FA47-71CA-11E1-9E33-C80AA9429562:0",
    "--type frobnicate",
]
SERVER = "--host 127.0.0.1 --port 1 --no-defaults --non-blocking"  # nothing listens on port 1

CASES: list[str] = [
    *(f"{cmd} {f}" for cmd in ("dump", "sql", "stats") for f in FILE_INPUTS),
    *(f"{cmd} {opt} {{goodfile}}" for cmd in ("dump", "sql", "stats") for opt in BAD_OPTIONS),
    "stats --top abc {goodfile}",
    "stats --plot {out}/charts.svg {goodfile}",
    *(f"index {s}" for s in SERIES_INPUTS),
    # (a cut file after the answer is not in the way: find-position reads no further than it needs)
    *(f"find-position {s} --datetime 2021-01-01" for s in SERIES_INPUTS if s != "{cutseries}"),
    "find-position {good} --datetime 2021-99-01",
    "find-position {good} --gtid-set nonsense",
    *(f"schema {s}" for s in SERIES_INPUTS),
    "schema {good} --at nocolon",
    "schema {good} --at bin.000001:abc",
    "schema {good} --schema {missing}",
    *(f"sync {s} --to delta:{{out}}/lake" for s in SERIES_INPUTS),
    *(f"sync {s} --stream --to delta:{{out}}/lake" for s in ("{missingdir}", "{notes}")),
    "sync {good} --to delta:{afile}",
    "sync {good} --to parquet:{afile}",
    "sync {good} --to oracle:{out}/x",
    "sync {good} --to jdbc:oracle:thin:@//host:1521/db",
    "sync {good} --to jdbc:postgresql://h/db --to-password-env BINLAKE_NO_SUCH_VARIABLE",
    "sync {good} --to jdbc:postgresql://h/db --to-password-file {missing}",
    "sync {good} --to delta:{out}/lake --schema {missing}",
    "export --from delta:{missingdir} --to parquet:{out}/pq",
    "export --from delta:{good} --to parquet:{afile}",
    "export --from parquet:{good} --to delta:{out}/x",
    *(f"merge --node {s} -o {{out}}/merged" for s in SERIES_INPUTS),
    "merge --node {good} -o {afile}",
    "merge --node {good} -o {out}/merged --max-file-size lots",
    "generate {afile} --size 100KB",
    "generate {out}/gen --size lots",
    "simulate-shards {afile} --transactions 5",
    f"tail {SERVER}",
    f"mirror {SERVER} --to {{out}}/mirror",
    f"mirror {SERVER} --to {{afile}}",
    "tail --no-defaults --ssl-mode VERIFY_CA --ssl-ca {missing} --host 127.0.0.1 --port 1",
    "tail --no-defaults --defaults-file {missing}",
]


@pytest.mark.skipif(not os.path.exists(sys.executable), reason="needs the interpreter")
@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_and_exit_2(bad: dict[str, str], case: str) -> None:
    argv = [part.format(**bad) for part in case.split()]
    started = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "binlake.cli", *argv],
        capture_output=True,
        timeout=60,
        env={**os.environ, "HOME": bad["out"]},  # no ~/.my.cnf of the machine's
    )
    err = res.stderr.decode(errors="replace")
    shown = f"{case}\n--- stderr:\n{err}"
    assert res.returncode == 2, shown
    assert not any(s in err for s in STACKS), shown
    lines = [line for line in err.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, shown
    assert lines[-1].startswith("binlake"), shown
    assert time.monotonic() - started < 20, f"{case}: took too long (did Spark start?)"


@pytest.mark.parametrize("cmd", ["index", "changes", "schema", "find-position --datetime 2021-01-01"])
def test_a_directory_without_binlogs_is_named(bad: dict[str, str], cmd: str) -> None:
    """'binlake: error: no binlog files' did not say where none were found."""
    res = subprocess.run(
        [sys.executable, "-m", "binlake.cli", *cmd.split(), bad["empty"]], capture_output=True, timeout=60
    )
    err = res.stderr.decode(errors="replace")
    assert res.returncode == 2 and bad["empty"] in err and len(err.splitlines()) == 1, err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file")
def test_unreadable_file(bad: dict[str, str], tmp_path: Path) -> None:
    locked = tmp_path / "locked.000001"
    shutil.copy(bad["goodfile"], locked)
    locked.chmod(0)
    for cmd in ("dump", "index"):
        res = subprocess.run([sys.executable, "-m", "binlake.cli", cmd, str(locked)], capture_output=True)
        err = res.stderr.decode()
        assert res.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err


def test_an_engine_error_is_cut_to_its_cause() -> None:
    """A Spark or delta-rs error reaching main() is one line: the binlake error a Python worker
    raised (it names file and offset), else the innermost Python error, else the first line."""
    from binlake.cli import engine_error_line

    worker = Exception(
        "An exception was thrown from the Python worker. Please see the stack trace below.\n"
        'Traceback (most recent call last):\n  File "x.py", line 1, in read\n'
        "ValueError: wrapped\n\nDuring handling of the above exception, another exception occurred:\n"
        "binlake.errors.BadMagicError: /d/bin.000001, offset 0: not a binlog file\n"
        "\tat org.apache.spark.api.python.BasePythonRunner(PythonRunner.scala:572)\n"
    )
    assert engine_error_line(worker) == "/d/bin.000001, offset 0: not a binlog file"
    arrow = Exception("Generic DeltaTable error: Arrow error\nDetail: Traceback...\nValueError: bad value\n")
    assert engine_error_line(arrow) == "ValueError: bad value"
    java = Exception("\n[PATH_NOT_FOUND] Path does not exist: /x.\n\tat org.apache.Foo\n")
    assert engine_error_line(java) == "Exception: [PATH_NOT_FOUND] Path does not exist: /x."
