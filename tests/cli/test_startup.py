"""Start-up of the commands a DBA runs most: the DDL parser (sqlglot, about 80 ms of CPU) and zstd
are imported only when a binlog needs them, with the same output either way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from binlake import BinlogReader
from binlake.generate import generate
from binlake.schema import SchemaHistory, SchemaTracker
from binlake.schema.ddl import is_ddl

COMMANDS = (["dump"], ["dump", "--format", "json"], ["sql"], ["sql", "--flashback"], ["stats"])


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A generated MySQL 8 series: its first file holds the CREATE TABLEs, the next ones only DML
    (table maps with column names: binlog_row_metadata=FULL)."""
    out = tmp_path_factory.mktemp("gen")
    generate(out, flavor="mysql80", seed=5, target_bytes=300_000, max_file_size=100_000)
    return sorted(out.glob("binlog.0*"))


def _ddl_count(path: Path) -> int:
    return sum(
        1 for ev in BinlogReader(path) if isinstance(q := getattr(ev.body, "query", None), str) and is_ddl(q)
    )


def _run(argv: list[str]) -> tuple[bytes, list[str]]:
    """The command's stdout and the modules loaded once it returned, in a fresh interpreter."""
    script = (
        "import json, sys, io, contextlib\nfrom binlake.cli import main\nbuf = io.BytesIO()\n"
        "out = io.TextIOWrapper(buf, encoding='utf-8', write_through=True)\n"
        f"with contextlib.redirect_stdout(out):\n    assert main({argv!r}) == 0\n"
        "sys.stderr.write(buf.getvalue().hex() + '\\n' + json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    hexed, modules = done.stderr.splitlines()[-2:]
    return bytes.fromhex(hexed), json.loads(modules)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_no_ddl_no_sqlglot(series: list[Path], command: list[str]) -> None:
    """A file without DDL: no sqlglot, no zstandard. The first file (CREATE TABLEs) neither: its
    table maps carry their column names, so its DDL is parsed only for --save-schema, which
    changes nothing in the output."""
    plain, ddl = series[1], series[0]
    assert _ddl_count(plain) == 0 and _ddl_count(ddl) > 0
    out, loaded = _run([*command, str(plain)])
    assert out and not [m for m in loaded if m.split(".")[0] in ("sqlglot", "zstandard")]
    out, loaded = _run([*command, str(ddl)])
    assert out and "sqlglot" not in loaded


def test_the_history_is_saved_as_before(series: list[Path], tmp_path: Path) -> None:
    """--save-schema applies the DDL whose parse was left for later: the same history as a tracker
    that applied each statement as it came, and the same output as without saving."""
    saved = tmp_path / "h.json"
    out, loaded = _run(["dump", "--save-schema", str(saved), *map(str, series)])
    assert "sqlglot" in loaded and out == _run(["dump", *map(str, series)])[0]
    tracker = SchemaTracker(SchemaHistory())
    for f in series:
        for _ in BinlogReader(f, observers=[tracker]):
            pass
    want = tmp_path / "want.json"
    tracker.history.save(str(want))
    assert json.loads(saved.read_text()) == json.loads(want.read_text())
    assert len(tracker.history.changes) > 0


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_maps_without_names_are_named_from_the_ddl(
    tmp_path_factory: pytest.TempPathFactory, command: list[str]
) -> None:
    """MySQL 5.7's table maps carry no column names: the DDL before them is parsed, as a tracker that
    applies each statement as it comes names them (the output of the command equals the output
    with that tracker's history saved alongside, which applies every statement)."""
    out_dir = tmp_path_factory.mktemp("mysql57")
    generate(out_dir, flavor="mysql57", seed=5, target_bytes=200_000, max_file_size=None)
    files = [str(f) for f in sorted(out_dir.glob("binlog.0*"))]
    out, loaded = _run([*command, *files])
    assert "sqlglot" in loaded
    if command[0] != "stats":
        assert b"`id`" in out or b'"id"' in out
    saved = out_dir / "h.json"
    assert _run([*command, "--save-schema", str(saved), *files])[0] == out
