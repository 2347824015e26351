"""Statistics over a binlog series: activity over time, per-table and per-operation counts, the
largest and longest transactions, group commits, and the parallelism the logical clock allows."""

from __future__ import annotations

import bisect
import collections
import datetime as dt
import html
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from binlake.events.rows import Rows
from binlake.txn import UNFINISHED, Transaction


@dataclass
class TxnInfo:
    gtid: str | None
    where: str
    rows: int
    bytes: int
    seconds: int  # from its first event's header time to its commit event's


@dataclass
class Stats:
    transactions: int = 0
    rows: int = 0
    bytes: int = 0
    first_us: int | None = None
    last_us: int | None = None
    per_second: collections.Counter[int] = field(default_factory=collections.Counter)  # txns per second
    rows_per_second: collections.Counter[int] = field(default_factory=collections.Counter)
    per_table: collections.Counter[tuple[str, str, str]] = field(default_factory=collections.Counter)
    kinds: collections.Counter[str] = field(default_factory=collections.Counter)
    largest: list[TxnInfo] = field(default_factory=list)
    longest: list[TxnInfo] = field(default_factory=list)
    group_sizes: collections.Counter[int] = field(default_factory=collections.Counter)  # group size -> groups
    critical_path: int = 0  # transactions on the longest dependency chain (unit cost each)
    logical_clock: bool = False

    @property
    def parallelism(self) -> float:
        """How many transactions an applier with unlimited workers could run at once, on average."""
        return self.transactions / self.critical_path if self.critical_path else 1.0


class StatsCollector:
    def __init__(self, top: int = 5) -> None:
        self.s = Stats()
        self.top = top
        self._group_key: object = None
        self._group_size = 0
        self._level_by_seq: dict[tuple[int, int], int] = {}  # (file_seq, sequence_number) -> chain length
        self._chain = 0
        self._file: int | None = None  # the file of the last transaction clocked
        self._base = 0  # the chain before that file began (a file starts after every earlier one)

    def add(self, t: Transaction) -> None:
        if t.kind == UNFINISHED:
            return
        s = self.s
        s.transactions += 1
        size = sum(e.header.event_size for e in t.events)
        s.bytes += size
        s.rows += t.rows
        s.kinds[t.kind] += 1
        when = t.commit_time_us
        s.first_us = when if s.first_us is None else min(s.first_us, when)
        s.last_us = when if s.last_us is None else max(s.last_us, when)
        s.per_second[when // 1_000_000] += 1
        s.rows_per_second[when // 1_000_000] += t.rows
        for e in t.events:
            b = e.body
            if isinstance(b, Rows) and b.table is not None:
                s.per_table[(b.table.database, b.table.table, b.operation)] += b.row_total
        info = TxnInfo(t.gtid, f"{t.source}:{t.start}", t.rows, size, t.commit_header_ts - t.first_header_ts)
        self._keep(s.largest, info, _by_size)
        self._keep(s.longest, info, _by_duration)
        self._clock(t)

    def _keep(self, top: list[TxnInfo], info: TxnInfo, key: Callable[[TxnInfo], Any]) -> None:
        """``top`` stays the first ``self.top`` by ``key``, earlier ones first among equals (as a
        stable sort of the list with ``info`` appended would leave it), without sorting per transaction."""
        if len(top) >= self.top and (not top or key(info) >= key(top[-1])):
            return
        bisect.insort_right(top, info, key=key)
        del top[self.top :]

    def _clock(self, t: Transaction) -> None:
        """Group commits share last_committed (MySQL) or commit_id (MariaDB); a transaction depends
        on the one whose sequence_number is its last_committed."""
        key = (t.file_seq, t.last_committed) if t.last_committed is not None else object()
        if key == self._group_key:
            self._group_size += 1
        else:
            if self._group_size:
                self.s.group_sizes[self._group_size] += 1
            self._group_key, self._group_size = key, 1
        if t.file_seq != self._file:  # a new file: its clock restarts, after every earlier one
            self._file, self._base = t.file_seq, self._chain
        if t.sequence_number is not None and t.last_committed is not None:
            self.s.logical_clock = True
            # (a replica's applier waits for all its workers at each file's FORMAT_DESCRIPTION: a
            # file's transactions run after the last file's, however low their last_committed)
            level = self._level_by_seq.get((t.file_seq, t.last_committed), self._base) + 1
            self._level_by_seq[(t.file_seq, t.sequence_number)] = level
            self._chain = max(self._chain, level)
        else:
            self._chain += 1  # no logical clock: serial
        self.s.critical_path = self._chain

    def finish(self) -> Stats:
        if self._group_size:
            self.s.group_sizes[self._group_size] += 1
            self._group_size = 0
        return self.s


def _by_size(i: TxnInfo) -> tuple[int, int]:
    return (-i.rows, -i.bytes)


def _by_duration(i: TxnInfo) -> int:
    return -i.seconds


def collect(transactions: Iterable[Transaction], top: int = 5) -> Stats:
    c = StatsCollector(top)
    for t in transactions:
        c.add(t)
    return c.finish()


def _ts(us: int | None) -> str:
    return (
        "-"
        if us is None
        else dt.datetime.fromtimestamp(us / 1e6, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    )


def print_stats(s: Stats, console: object | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    from binlake.console import output_console, plain

    con = console if isinstance(console, Console) else output_console()
    span = max(((s.last_us or 0) - (s.first_us or 0)) / 1e6, 1e-9)
    summary = Table(title="binlog statistics", show_header=False)
    for k, v in [
        ("commits from", _ts(s.first_us)),
        ("to", _ts(s.last_us)),
        ("transactions", f"{s.transactions:,}"),
        ("row changes", f"{s.rows:,}"),
        ("bytes in transactions", f"{s.bytes:,}"),
        ("transactions / s", f"{s.transactions / span:,.1f}"),
        ("rows / s", f"{s.rows / span:,.1f}"),
        ("kinds", ", ".join(f"{k} {n}" for k, n in s.kinds.most_common())),
        ("group commits", ", ".join(f"{n}×{size}" for size, n in sorted(s.group_sizes.items()))),
        (
            "logical-clock parallelism",
            f"{s.parallelism:.2f}" + ("" if s.logical_clock else " (no logical clock: serial)"),
        ),
    ]:
        summary.add_row(k, v)
    con.print(summary)
    tables = Table(title="row changes per table")
    for c in ("database", "table", "operation", "rows"):
        tables.add_column(c, justify="right" if c == "rows" else "left")
    for (db, tbl, op), n in sorted(s.per_table.items(), key=lambda kv: -kv[1]):
        tables.add_row(plain(db), plain(tbl), op, f"{n:,}")
    con.print(tables)
    for title, items in (("largest transactions", s.largest), ("longest transactions", s.longest)):
        t = Table(title=title)
        for c in ("gtid", "where", "rows", "bytes", "seconds"):
            t.add_column(c)
        for i in items:
            t.add_row(
                plain(i.gtid or "anonymous"), plain(i.where), f"{i.rows:,}", f"{i.bytes:,}", str(i.seconds)
            )
        con.print(t)


def _svg_bars(
    title: str,
    series: dict[int, int],
    width: int = 900,
    height: int = 220,
    label: Callable[[int], str] = lambda x: _ts(x * 1_000_000),
    count: str = "",
) -> str:
    """Bars of ``series`` (x: a second since the epoch, or what ``label`` names; y: a count)."""
    if not series:
        return f"<h3>{html.escape(title)}</h3><p>no data</p>"
    xs = sorted(series)
    lo, hi = xs[0], xs[-1]
    peak = max(series.values()) or 1
    n = hi - lo + 1
    bw = max(width / n, 1.0)
    bars = "".join(
        f'<rect x="{(x - lo) * bw:.2f}" y="{height - series[x] / peak * (height - 20):.2f}" width="{max(bw - 0.5, 0.5):.2f}" '
        f'height="{series[x] / peak * (height - 20):.2f}" fill="#3b7dd8"><title>{label(x)}: {series[x]}{count}</title></rect>'
        for x in xs
    )
    return (
        f"<h3>{html.escape(title)}</h3><svg width='{width}' height='{height}' style='background:#f7f7f7'>{bars}"
        f"<text x='4' y='14' font-size='12'>peak {peak:,}</text></svg>"
        f"<p>{label(lo)} — {label(hi)}</p>"
    )


PLOT_SUFFIXES = (".html", ".png")


def write_plot(s: Stats, path: str) -> None:
    """Charts of activity over time: ``.html`` (self-contained SVG) or ``.png`` (needs matplotlib)."""
    if not path.endswith(PLOT_SUFFIXES):
        raise ValueError(f"{path}: charts are written as .html or .png")
    if path.endswith(".png"):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(3, 1, figsize=(10, 8))
        for ax, (title, data) in zip(
            axes,
            (("transactions per second", s.per_second), ("rows per second", s.rows_per_second)),
            strict=False,
        ):
            xs = sorted(data)
            ax.bar(
                [dt.datetime.fromtimestamp(x, dt.UTC) for x in xs],
                [data[x] for x in xs],
                width=1 / 86400,
            )
            ax.set_title(title)
        sizes = sorted(s.group_sizes)
        axes[2].bar([str(x) for x in sizes], [s.group_sizes[x] for x in sizes])
        axes[2].set_title("group commit sizes (transactions per group)")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return
    parts = [
        "<!doctype html><meta charset='utf-8'><title>binlake stats</title><body style='font-family:sans-serif'>",
        f"<h2>{s.transactions:,} transactions, {s.rows:,} row changes</h2>",
        _svg_bars("transactions per second", dict(s.per_second)),
        _svg_bars("rows per second", dict(s.rows_per_second)),
        _svg_bars(
            "group commit sizes (groups of n transactions)",
            dict(s.group_sizes),
            label=lambda n: f"{n} transaction(s)",
            count=" group(s)",
        ),
        "</body>",
    ]
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(parts))
