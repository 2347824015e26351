"""Header-only scan speed (position search, per-file index): no row payload is read.

    python benchmarks/scan.py [--size-mb 1000]

Prints GB/s of the header-only scan of a ≥1 GB binlog written by a private MariaDB, the time of a
find-position by datetime over it, and the ratio against full decoding of the first 100 MB.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_binlog import ensure_binlog  # noqa: E402
from binlake.position import find_by_time, index_file  # noqa: E402
from binlake.reader import BinlogReader  # noqa: E402
from binlake.series import BinlogSeries  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=1000)
    args = ap.parse_args()
    files = ensure_binlog(args.size_mb)
    size = sum(f.stat().st_size for f in files)
    t0 = time.perf_counter()
    indexes = [index_file(f) for f in files]
    scan = time.perf_counter() - t0
    txns = sum(ix.transactions for ix in indexes)
    events = sum(ix.events for ix in indexes)
    series = BinlogSeries.open(*files)
    middle = (indexes[0].first_commit_us + indexes[-1].last_commit_us) // 2
    t0 = time.perf_counter()
    found = find_by_time(series, middle)
    search = time.perf_counter() - t0
    t0 = time.perf_counter()
    decoded = 0
    for ev in BinlogReader(files[0], stop_position=100_000_000):
        decoded = ev.end_offset
    full = time.perf_counter() - t0
    print(f"binlog: {len(files)} file(s), {size / 1e9:.2f} GB, {events:,} events, {txns:,} transactions")
    print(f"header-only scan (index of every file): {scan:.2f} s = {size / scan / 1e9:.2f} GB/s")
    print(f"find-position --datetime (middle of the range): {search:.2f} s -> {found.position}")
    print(
        f"full decoding: {decoded / full / 1e6:.1f} MB/s; header-only scan is {size / scan / (decoded / full):.0f}x faster"
    )


if __name__ == "__main__":
    main()
