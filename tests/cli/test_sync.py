"""``binlake sync`` from the command line (cli/sync.py): damage found once Spark runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FILE = "mysql-server-8.0.39/std_data/replicated-bin.000001"  # its WRITE_ROWS_V2 at 376..533
STACKS = ("Traceback", "py4j", "at org.", "at java.", "Exception in thread", "Caused by:")


def test_damage_met_in_a_spark_task_is_one_line_without_a_stack(corpus: Path, tmp_path: Path) -> None:
    """Newcomer: `binlake sync damaged.bin --to delta:lake`, where damaged.bin is replicated-bin.000001
    with 4 bytes overwritten at 400 (inside a rows event, so only its CRC32 tells): the run ended with
    the README's one line (`binlake: error: …damaged.bin, offset 376: CRC32 mismatch in
    WRITE_ROWS_V2 event …`), exit 2 — but before it Spark's executor logged `ERROR Executor:
    Exception in task 0.0`, the Python traceback and ~60 lines of Java stack. The README: bad input
    ends with one line "in every command (… no traceback, no Java stack, one line)"; a header-only
    check cannot see a checksum, so this damage is met in a task, and its report must stay one line."""
    data = bytearray((corpus / FILE).read_bytes())
    data[400:404] = b"\xff\xff\xff\xff"
    damaged = tmp_path / "damaged.bin"
    damaged.write_bytes(bytes(data))
    res = subprocess.run(
        [sys.executable, "-m", "binlake.cli", "sync", str(damaged), "--to", f"delta:{tmp_path / 'lake'}"],
        capture_output=True,
        timeout=300,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    err = res.stderr.decode(errors="replace")
    assert res.returncode == 2, err
    assert "damaged.bin, offset 376: CRC32 mismatch" in err.splitlines()[-1], err
    assert not [s for s in STACKS if s in err], err
