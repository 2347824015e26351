"""The sync progress display: fed by Spark's status tracker and the sink's phases."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from binlake.generate import generate
from binlake.spark.apply import sync
from binlake.spark.progress import SyncProgress

pytestmark = pytest.mark.slow


def test_progress_reads_running_stages(spark: Any) -> None:
    progress = SyncProgress(spark, total_bytes=8_000_000, console=Console(record=True, width=140))
    job = threading.Thread(
        target=lambda: spark.sparkContext.parallelize(range(4), 4).foreach(lambda _: time.sleep(1.5)),
        daemon=True,
    )
    job.start()
    seen = (0, 0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and seen[1] == 0:
        seen = progress.poll_once()
        time.sleep(0.05)
    job.join()
    assert seen[1] == 4, "the running stage's 4 tasks are seen"
    assert "MB" in progress.progress.tasks[0].fields["detail"]


def test_sync_reports_its_phases(spark: Any, tmp_path: Path) -> None:
    generate(tmp_path / "bin", seed=3, target_bytes=150_000, max_file_size=100_000, ddl_every=0)
    console = Console(record=True, width=140)
    phases: list[str] = []
    with SyncProgress(spark, 150_000, console) as progress:

        def phase(text: str) -> None:
            phases.append(text)
            progress.phase(text)

        report = sync(spark, str(tmp_path / "bin"), tmp_path / "delta", on_phase=phase)
    assert phases[0] == "reading the change log"
    assert [p for p in phases if p.startswith("merging")] == [f"merging {t}" for t in sorted(report.tables)]
    assert "done" in console.export_text()
