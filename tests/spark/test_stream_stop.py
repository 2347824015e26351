"""Ctrl-C on ``binlake sync --stream``: the terminal signals the whole process group (the driver and
its JVM); the stream stops between calls into the JVM and prints its summary, no py4j traceback."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from binlake.generate import generate

pytestmark = pytest.mark.slow


def test_ctrl_c_stops_a_stream_with_its_summary(tmp_path: Path) -> None:
    if shutil.which("java") is None and not Path("/usr/lib/jvm/java-17-openjdk-amd64").exists():
        pytest.skip("Java 17 is needed for Spark")
    workload = generate(tmp_path / "gen", seed=5, target_bytes=50_000)
    source, out = tmp_path / "src", tmp_path / "lake"
    source.mkdir()
    for f in workload.files:
        shutil.copy(f, source / f.name)
    argv = ["sync", str(source), "--stream", "--interval", "1 second", "--master", "local[1]"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "binlake.cli", *argv, "--to", f"delta:{out}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        deadline = time.monotonic() + 240
        while not any(out.glob("*/_delta_log/*.json")):  # the first batch is committed
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err, said = stderr.decode(errors="replace"), stdout.decode(errors="replace")
    assert proc.returncode in (0, 130), err
    assert "Traceback" not in err and "py4j" not in err and "KeyboardInterrupt" not in err, err
    assert "micro-batches" in said and "rows merged" in said, said
