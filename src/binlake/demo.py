"""The embedded default run of the main job: a generated MySQL 8 binlog series (deterministic, with
its truth) is applied to local Delta tables by the Spark pipeline, and the result is checked against
the truth. Needs nothing but this package and Java 17."""

from __future__ import annotations

import errno
import json
import shutil
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from binlake.console import output_console
from binlake.generate import GenConfig, Generator


def compare_to_truth(truth_dir: Path, target: Path) -> dict[str, tuple[list[dict], list[dict]]]:
    """Per table of a generator's truth (final names): (synced rows, truth rows), both on the truth's
    columns — a target also keeps columns dropped upstream — typed the way Delta holds them."""
    from deltalake import DeltaTable

    from binlake.spark.sinks.delta import read_delta
    from binlake.spark.typed import arrow_type, convert

    out = {}
    for path in sorted(truth_dir.glob("*.*.jsonl")):
        name = path.name[: -len(".jsonl")]
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        if not rows:
            continue
        described: dict[str, dict] = {}
        if (target / name / "_delta_log").is_dir():
            for commit in DeltaTable(str(target / name)).history():  # newest first
                for c in json.loads(commit.get("binlake.columns") or "[]"):
                    described.setdefault(c["name"], c)
        if any(n not in described for n in rows[0]):
            out[name] = ([], rows)  # the table or one of its columns is missing
            continue
        cols = [described[n] for n in rows[0]]

        def by_key(r: dict, key: str = cols[0]["name"]) -> str:
            return str(r[key])

        want = sorted(
            ({c["name"]: convert(r[c["name"]], c, arrow_type(c)) for c in cols} for r in rows), key=by_key
        )
        have = read_delta(target, name).to_pylist()
        out[name] = (sorted(({c["name"]: r[c["name"]] for c in cols} for r in have), key=by_key), want)
    return out


DEMO_MARK = ".binlake-demo"  # in a directory the demo made: the next run may empty it
DEMO_ENTRIES = {DEMO_MARK, "binlogs", "delta"}


def demo_dir(root: Path) -> bool:
    """Whether the demo may empty ``root`` and work there: new, empty, or made by an earlier run
    (its mark, or nothing but what a run makes). Never a user's own directory."""
    if not root.exists():
        return True
    if not root.is_dir():
        return False
    names = {p.name for p in root.iterdir()}
    return DEMO_MARK in names or names <= DEMO_ENTRIES


def run_demo(workdir: str | Path, console: Console | None = None, size: int = 3_000_000) -> int:
    from binlake.spark.apply import sync
    from binlake.spark.session import spark_session
    from binlake.spark.sinks.delta import delta_tables

    console = console or output_console()
    root = Path(workdir).resolve()
    if not demo_dir(root):
        raise FileExistsError(
            errno.EEXIST, "not empty and not an earlier demo's: give a new or empty directory", str(root)
        )
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / DEMO_MARK).touch()
    started = time.time()
    with console.status("generating a MySQL 8 binlog series (seeded, with DDL and truth)"):
        result = Generator(GenConfig(seed=1, target_bytes=size, max_file_size=1_000_000, ddl_every=150)).run(
            root / "binlogs"
        )
    console.print(
        f"binlogs: {len(result.files)} files, {sum(f.stat().st_size for f in result.files):,} bytes in {root / 'binlogs'}"
        " (columns added, dropped and renamed, tables renamed on the way)"
    )
    with console.status("starting Spark (local) and syncing into Delta"):
        spark = spark_session("local[*]")
        report = sync(spark, str(root / "binlogs"), root / "delta")
    table = Table(
        title=f"binlake sync -> {root / 'delta'} (last transaction applied starts at {report.position})",
        caption="rows merged: the last change of each key (earlier changes of a key are replaced)",
    )
    for c in ("table", "rows merged", "rows now", "equals the truth"):
        table.add_column(c)
    compared = compare_to_truth(result.truth_dir, root / "delta")
    ok = sorted(delta_tables(root / "delta")) == sorted(compared)  # nothing left under an old name
    for name, (got, want) in compared.items():
        same = got == want
        ok &= same
        table.add_row(name, f"{report.tables.get(name, 0):,}", f"{len(got):,}", "yes" if same else "NO")
    console.print(table)
    console.print(f"{report.changes:,} row changes applied exactly once in {time.time() - started:.1f}s")
    return 0 if ok else 1
