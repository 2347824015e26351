"""``latestOffset`` of a growing binlog scans on from where it stopped: at every size it must be the
boundary a scan of the whole file finds — also when the file is replaced under the same name."""

from __future__ import annotations

import os
from pathlib import Path

from binlake.generate import generate
from binlake.position import last_boundary
from binlake.spark.stream import BinlogStreamReader


def test_latest_offset_of_a_growing_then_replaced_file(tmp_path: Path) -> None:
    first = generate(tmp_path / "a", seed=21, target_bytes=60_000, max_file_size=None, ddl_every=0).files[0]
    other = generate(tmp_path / "b", seed=22, target_bytes=90_000, max_file_size=None, ddl_every=0).files[0]
    live = tmp_path / "live"
    live.mkdir()
    path = live / first.name
    reader = BinlogStreamReader({"path": str(live)})
    data = first.read_bytes()
    with open(path, "wb") as f:
        for size in [*range(4, len(data), 997), len(data)]:  # cut anywhere: inside events too
            f.write(data[f.tell() : size])
            f.flush()
            want = last_boundary(path, 4)
            got = reader.latestOffset()
            assert got == ({"file": path.name, "pos": want} if want > 4 else {"file": "", "pos": 0}), size
    assert reader.latestOffset()["pos"] == last_boundary(first, 4) > 4
    assert other.stat().st_size > len(data)
    swap = live / "swap"
    swap.write_bytes(other.read_bytes())
    os.replace(swap, path)  # another file, longer than the one scanned, under the same name
    assert reader.latestOffset() == {"file": path.name, "pos": last_boundary(path, 4)}
