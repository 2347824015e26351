"""The embedded default run of the main job: a generated MySQL 8 binlog series (deterministic, with
its truth) is applied to local Delta tables by the Spark pipeline, and the result is checked against
the truth. Needs nothing but this package and Java 17."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from binlake.generate import GenConfig, Generator


def run_demo(workdir: str | Path, console: Console | None = None, size: int = 3_000_000) -> int:
    from binlake.spark.apply import delta_tables, read_delta, sync_to_delta
    from binlake.spark.session import spark_session
    from binlake.spark.typed import arrow_type, convert

    console = console or Console()
    root = Path(workdir).resolve()
    shutil.rmtree(root, ignore_errors=True)
    started = time.time()
    with console.status("generating a MySQL 8 binlog series (seeded, with truth)"):
        result = Generator(GenConfig(seed=1, target_bytes=size, max_file_size=1_000_000, ddl_every=0)).run(
            root / "binlogs"
        )
    console.print(
        f"binlogs: {len(result.files)} files, {sum(f.stat().st_size for f in result.files):,} bytes in {root / 'binlogs'}"
    )
    with console.status("starting Spark (local) and syncing into Delta"):
        spark = spark_session("local[*]")
        report = sync_to_delta(spark, str(root / "binlogs"), root / "delta")
    table = Table(title=f"binlake sync -> {root / 'delta'} (up to {report.position})")
    for c in ("table", "rows merged", "rows now", "equals the truth"):
        table.add_column(c)
    ok = True
    from deltalake import DeltaTable

    for name in delta_tables(root / "delta"):
        cols = json.loads(DeltaTable(str(root / "delta" / name)).history()[-1]["binlake.columns"])
        got = sorted(read_delta(root / "delta", name).to_pylist(), key=lambda r: str(r[cols[0]["name"]]))
        rows = [json.loads(line) for line in (result.truth_dir / f"{name}.jsonl").read_text().splitlines()]
        want = sorted(
            ({c["name"]: convert(r.get(c["name"]), c, arrow_type(c)) for c in cols} for r in rows),
            key=lambda r: str(r[cols[0]["name"]]),
        )
        same = got == want
        ok &= same
        table.add_row(name, f"{report.tables.get(name, 0):,}", f"{len(got):,}", "yes" if same else "NO")
    console.print(table)
    console.print(f"{report.changes:,} row changes applied exactly once in {time.time() - started:.1f}s")
    return 0 if ok else 1
