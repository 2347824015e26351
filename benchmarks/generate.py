"""Workload generation speed and memory: ``binlake generate --size`` in a child process.

    python benchmarks/generate.py [--size 1GB]

Prints MB/s and the child's peak RSS: memory must stay bounded whatever the size.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", default="1GB")
    ap.add_argument("--out", default="out/bench/generated")
    args = ap.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "binlake.cli", "generate", str(out), "--size", args.size], check=True
    )
    elapsed = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    size = sum(f.stat().st_size for f in out.glob("binlog.0*"))
    print(
        f"generated {size / 1e6:.0f} MB in {elapsed:.1f} s = {size / 1e6 / elapsed:.1f} MB/s; peak RSS {rss_mb:.0f} MB"
    )


if __name__ == "__main__":
    main()
