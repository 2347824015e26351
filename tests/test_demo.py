"""The README's main-job command works end to end (private MariaDB -> binlog -> decoded outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from binlake.demo import run_demo
from binlake.sandbox import mariadb_available

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not mariadb_available(), reason="mariadbd is not installed (./dev setup installs it)")
def test_demo_decodes_its_sample(tmp_path: Path) -> None:
    console = Console(record=True, width=120)
    assert run_demo(tmp_path, console) == 0
    out = console.export_text()
    assert "shop" in out and "customers" in out
    events = [json.loads(line) for line in (tmp_path / "dump.jsonl").read_text().splitlines()]
    rows = [
        r
        for e in events
        if e["type"].endswith("ROWS_V1") or "ROWS" in e["type"]
        for r in e["body"].get("rows", [])
    ]
    inserted = [r["after"] for r in rows if r["before"] is None]
    zoe = next(r for r in inserted if r.get("name") == "Zoë Ünicode")
    assert zoe["balance"] == "-15.25" and zoe["joined"] == "0000-00-00" and zoe["tier"] == "platinum"
    assert "### UPDATE `shop`.`orders`" in (tmp_path / "dump.txt").read_text()
