"""The README's main-job command works end to end: generated binlogs -> Spark -> Delta, checked
against the truth; and `binlake sync` from the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from binlake.demo import run_demo

pytestmark = pytest.mark.slow


def test_demo_syncs_its_sample_to_the_truth(spark: Any, tmp_path: Path) -> None:
    console = Console(record=True, width=140)
    assert run_demo(tmp_path, console, size=400_000) == 0
    out = console.export_text()
    assert "shop.orders" in out and "NO" not in out.split("equals the truth")[1]
    assert (tmp_path / "delta" / "shop.customers" / "_delta_log").is_dir()


def test_sync_command(spark: Any, tmp_path: Path) -> None:
    """`binlake sync` from the command line, `--to parquet:PATH`: a Parquet snapshot per table
    (renames followed), kept exactly-once by a Delta state beside it; a second run with more binlogs
    refreshes the snapshots; applying the same binlogs again finds every table done."""
    import shutil

    import pyarrow.parquet as pq

    from binlake.demo import compare_to_truth
    from binlake.generate import generate
    from binlake.spark.apply import sync
    from binlake.spark.sinks.delta import delta_tables, read_delta

    result = generate(tmp_path / "all", seed=6, target_bytes=200_000, max_file_size=70_000, ddl_every=15)
    src, out = tmp_path / "bin", tmp_path / "pq"
    src.mkdir()
    cmd = [
        sys.executable,
        "-m",
        "binlake.cli",
        "sync",
        str(src),
        "--to",
        f"parquet:{out}",
        "--master",
        "local[1]",
    ]
    for batch in (result.files[:1], result.files[1:]):
        for f in batch:
            shutil.copy(f, src / f.name)
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
    assert "shop." in run.stdout and "merged" in run.stdout and "snapshots" in run.stdout
    state = out / "_binlake_state"
    compared = compare_to_truth(result.truth_dir, state)
    assert compared and all(got == want for got, want in compared.values())
    assert delta_tables(state) == sorted(compared)  # nothing left under an old name
    assert sorted(p.name for p in out.glob("*.parquet")) == [
        f"{name}.parquet" for name in delta_tables(state)
    ]
    for name in compared:
        assert pq.read_table(out / f"{name}.parquet").to_pylist() == read_delta(state, name).to_pylist()
    again = sync(spark, str(src), state, options={})
    assert not again.tables and sorted(again.skipped) == delta_tables(state)


def test_demo_does_not_empty_a_directory_it_did_not_make(tmp_path: Path, monkeypatch: Any) -> None:
    """Newcomer: `binlake demo --workdir DIR` starts with `shutil.rmtree(DIR)` whatever DIR holds
    (`--help`: "emptied first"), so `binlake demo --workdir .` or a mistyped path deletes a user's
    files without a question. A directory that is not empty and holds no earlier demo run (its
    `binlogs/` and `delta/`) should be refused before anything is deleted. (The generator is
    replaced so the test never starts Spark.)"""
    import binlake.demo

    def no_run(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the demo went on")

    monkeypatch.setattr(binlake.demo, "Generator", no_run)
    precious = tmp_path / "notes.txt"
    precious.write_text("a user's file")
    with pytest.raises(FileExistsError, match="not an earlier demo's"):
        run_demo(tmp_path, Console(record=True))
    assert precious.exists()
    # what the demo may empty: a new or empty directory, an earlier run's (its mark, or only what a
    # run makes); and it marks the one it makes
    from binlake.demo import DEMO_MARK, demo_dir

    assert demo_dir(tmp_path / "new") and not demo_dir(precious)
    earlier = tmp_path / "earlier"
    (earlier / "binlogs").mkdir(parents=True)
    (earlier / "delta").mkdir()
    assert demo_dir(earlier)
    with pytest.raises(RuntimeError, match="the demo went on"):
        run_demo(earlier, Console(record=True))
    assert (earlier / DEMO_MARK).exists() and not (earlier / "binlogs").exists()
    (earlier / "notes.txt").write_text("a user's file")
    assert demo_dir(earlier)  # marked: an earlier run's, whatever was added to it
