"""Full decoding speed: binlake vs python-mysql-replication (PyPI ``mysql-replication``) on the same
event bytes, one core, in the same run; ``mariadb-binlog -vv`` (C) as a reference. Then plain
decoding of a generated MySQL 8 series (``binlake generate``: every column type, full metadata,
JSON, DDL), alone and with a schema history attached.

    python benchmarks/decode.py [--size-mb 100] [--mysql8-mb 100] [--repeat 3]

Prints MB/s and rows/s per core for each decoder and the ratio binlake / python-mysql-replication;
binlake with its pure-Python row decoder and, when built, the compiled one (same run, same bytes).
``--size-mb 0`` or ``--mysql8-mb 0`` leaves that part out; ``--repeat`` takes the best of N runs
(the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_binlog import ensure_binlog  # noqa: E402
from binlake import native  # noqa: E402
from binlake.events.rows import Rows  # noqa: E402
from binlake.generate import generate  # noqa: E402
from binlake.reader import BinlogReader  # noqa: E402
from binlake.schema import SchemaHistory, SchemaTracker  # noqa: E402
from binlake.values import plan  # noqa: E402


def raw_events(path: Path):
    """(offset, bytes) of every event, framed by the header length field only."""
    data = path.read_bytes()
    pos = 4
    while pos + 19 <= len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        yield pos, data[pos : pos + size]
        pos += size


def bench_binlake(files: list[Path], observers: Callable[[], list[Any]] | None = None) -> tuple[float, int]:
    """CPU seconds to decode every event, row and value of ``files`` (one reader per file, as the
    series reader does), and the rows decoded."""
    rows = 0
    attached = observers() if observers else None
    t0 = time.process_time()
    for f in files:
        for ev in BinlogReader(f, observers=attached):
            if isinstance(ev.body, Rows):
                rows += len(ev.body.rows)
    return time.process_time() - t0, rows


def best(repeat: int, run: Callable[[], tuple[float, int]]) -> tuple[float, int]:
    return min(run() for _ in range(max(repeat, 1)))


def mysql8_series(size_mb: int) -> list[Path]:
    """A generated MySQL 8 series of ``size_mb`` MB in one file, cached under out/bench."""
    out = Path("out/bench") / f"mysql8-{size_mb}mb"
    if not (out / "binlog.index").exists():
        shutil.rmtree(out, ignore_errors=True)
        generate(out, flavor="mysql80", target_bytes=size_mb * 1_000_000, max_file_size=None)
    return sorted(out.glob("binlog.0*"))


def paths() -> list[tuple[str, bool]]:
    """The row decoders to measure: the pure path, and the compiled one when it is built."""
    return [("pure", False), *([("compiled", True)] if plan.compiled_available() else [])]


def on_path(compiled: bool, run: Callable[[], tuple[float, int]]) -> Callable[[], tuple[float, int]]:
    def chosen() -> tuple[float, int]:
        native.use_compiled(compiled)
        return run()

    return chosen


def bench_mysql8(size_mb: int, repeat: int) -> None:
    files = mysql8_series(size_mb)
    mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"generated MySQL 8 series: {len(files)} file(s), {mb:.1f} MB")
    line = "{:<40} {:>9.2f} s {:>9.1f} MB/s {:>12,.0f} rows/s"
    history = lambda: [SchemaTracker(SchemaHistory())]  # noqa: E731
    for label, observers in (("plain decoding", None), ("+ schema history", history)):
        times = {}
        for name, compiled in paths():
            t, rows = best(repeat, on_path(compiled, lambda o=observers: bench_binlake(files, o)))
            times[name] = t
            print(line.format(f"binlake, {label} [{name}]", t, mb / t, rows / t))
        if len(times) == 2:
            print(f"{'  pure / compiled':<40} {times['pure'] / times['compiled']:>9.2f}x cpu")


class _Ctl:
    """The bits of a control connection python-mysql-replication's event classes touch."""

    charset = "utf8mb4"

    def __init__(self, dbms: str) -> None:
        self._dbms = dbms

    def _get_dbms(self) -> str:
        return self._dbms


def bench_pmr(files: list[Path]) -> tuple[float, int]:
    from pymysql.protocol import MysqlPacket
    from pymysqlreplication import event, row_event
    from pymysqlreplication.packet import BinLogPacketWrapper

    allowed = {
        row_event.TableMapEvent,
        row_event.WriteRowsEvent,
        row_event.UpdateRowsEvent,
        row_event.DeleteRowsEvent,
        event.QueryEvent,
        event.XidEvent,
        event.FormatDescriptionEvent,
        event.RotateEvent,
        event.GtidEvent,
        event.MariadbGtidEvent,
        event.MariadbAnnotateRowsEvent,
        event.MariadbBinLogCheckPointEvent,
        event.MariadbGtidListEvent,
        event.StopEvent,
    }
    ctl = _Ctl("mariadb")
    rows = 0
    packets = [(b"\x00" + raw) for f in files for _, raw in raw_events(f)]  # framing outside the timer
    t0 = time.process_time()
    table_map: dict = {}
    for pkt in packets:
        w = BinLogPacketWrapper(
            MysqlPacket(pkt, "utf8"),
            table_map,
            ctl,
            (10, 11, 0),
            True,
            allowed,
            None,
            None,
            None,
            None,
            False,
            False,
            False,
            True,
            False,
        )
        ev = w.event
        if isinstance(ev, row_event.RowsEvent):
            rows += len(ev.rows)
    return time.process_time() - t0, rows


def bench_mariadb_binlog(files: list[Path]) -> float | None:
    exe = shutil.which("mariadb-binlog")
    if exe is None:
        return None
    t0 = time.time()
    subprocess.run(
        [exe, "-vv", "--base64-output=decode-rows", *map(str, files)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
        env={**os.environ, "TZ": "UTC"},
    )
    return time.time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=100, help="MariaDB binlog size (0: skip)")
    ap.add_argument("--mysql8-mb", type=int, default=100, help="generated MySQL 8 series size (0: skip)")
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs of binlake")
    args = ap.parse_args()
    if args.size_mb:
        bench_mariadb(args.size_mb, args.repeat)
    if args.mysql8_mb:
        bench_mysql8(args.mysql8_mb, args.repeat)


def bench_mariadb(size_mb: int, repeat: int) -> None:
    files = ensure_binlog(size_mb)
    mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"binlog: {len(files)} file(s), {mb:.1f} MB")
    ours = {name: best(repeat, on_path(compiled, lambda: bench_binlake(files))) for name, compiled in paths()}
    t_pmr, rows_pmr = bench_pmr(files)
    t_c = bench_mariadb_binlog(files)
    line = "{:<28} {:>9.2f} s {:>9.1f} MB/s {:>12,.0f} rows/s"
    for name, (t, rows) in ours.items():
        print(line.format(f"binlake [{name}]", t, mb / t, rows / t))
    print(line.format("python-mysql-replication", t_pmr, mb / t_pmr, rows_pmr / t_pmr))
    if t_c is not None:
        print(f"{'mariadb-binlog -vv (C, wall)':<28} {t_c:>9.2f} s {mb / t_c:>9.1f} MB/s")
    for name, (t, rows) in ours.items():
        print(f"rows decoded: binlake [{name}] {rows:,}, python-mysql-replication {rows_pmr:,}")
        print(f"ratio binlake [{name}] / python-mysql-replication: {t_pmr / t:.2f}x per core")


if __name__ == "__main__":
    main()
