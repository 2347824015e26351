"""Statistics against brute force on real binlogs: counts, group commits, logical-clock parallelism."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

from binlake.events.rows import Rows
from binlake.series import BinlogSeries
from binlake.stats import collect, print_stats, write_plot
from binlake.txn import iter_transactions

FILE = "percona-server-8.0.27/zip-extracted/data80_rocks_index_ver_bump/data80_rocks_index_ver_bump/binlog.000001"


def simulate_parallelism(txns: list) -> float:
    """An applier with unlimited workers: a transaction starts once the one whose sequence_number
    equals its last_committed has finished; every transaction takes one step."""
    finish: dict[int, int] = {}
    for t in txns:
        start = finish.get(t.last_committed, 0)
        finish[t.sequence_number] = start + 1
    return len(txns) / max(finish.values())


def test_stats_match_brute_force(corpus: Path, tmp_path: Path) -> None:
    txns = list(iter_transactions(BinlogSeries.open(corpus / FILE).events()))
    s = collect(txns)
    assert s.transactions == len(txns) and s.rows == sum(t.rows for t in txns)
    per_table: collections.Counter = collections.Counter()
    for t in txns:
        for e in t.events:
            if isinstance(e.body, Rows):
                per_table[(e.body.table.database, e.body.table.table, e.body.operation)] += len(e.body.rows)
    assert s.per_table == per_table
    assert sum(size * n for size, n in s.group_sizes.items()) == len(txns)
    groups = collections.Counter(t.last_committed for t in txns)
    assert s.group_sizes == collections.Counter(groups.values())
    assert s.logical_clock and abs(s.parallelism - simulate_parallelism(txns)) < 1e-9
    assert s.largest[0].rows == max(t.rows for t in txns)
    print_stats(s)
    html = tmp_path / "s.html"
    write_plot(s, str(html))
    assert html.read_text().count("<svg") == 3
    png = tmp_path / "s.png"
    write_plot(s, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_names_from_the_binlog_are_shown_as_they_are_not_as_markup(mariadb: Any) -> None:
    """A table named like rich markup (brackets are legal in names) is shown as its characters;
    a control character in a name is shown escaped, never sent to the terminal."""
    from tests.render.pinned import run_cli

    name = "[bold][link=file:///etc/passwd]t[/link][/bold]"
    mariadb.execute(
        "DROP DATABASE IF EXISTS st", "CREATE DATABASE st", f"CREATE TABLE st.`{name}` (id INT PRIMARY KEY)"
    )
    mariadb.execute(f"INSERT INTO st.`{name}` VALUES (1)")
    files = [str(f) for f in mariadb.flush_binlogs()[-2:-1]]
    out = run_cli(["stats", *files])[1].decode()
    assert name in out

    from rich.console import Console

    from binlake.console import plain

    console = Console(width=200, force_terminal=True, color_system=None)
    with console.capture() as captured:
        console.print(plain("t\x1b[31m\x07\x7f"))
    assert captured.get().strip() == "t\\x1b[31m\\x07\\x7f"


def test_the_html_group_commit_chart_labels_sizes_not_times(corpus: Path, tmp_path: Path) -> None:
    """The group-size histogram went through the per-second chart: a group of 1 was titled
    '1970-01-01 00:00:01 UTC' and its range '1970-01-01 00:00:01 UTC — …'."""
    s = collect(
        iter_transactions(
            BinlogSeries.open(corpus / "zalora-binlog-parser/gtid-fixtures/mysql-bin.01").events()
        )
    )
    assert dict(s.group_sizes) == {1: 17}
    html = tmp_path / "s.html"
    write_plot(s, str(html))
    groups = html.read_text().split("group commit sizes", 1)[1]
    assert "1970" not in groups and "<title>1 transaction(s): 17 group(s)</title>" in groups


def test_a_plot_file_that_is_neither_html_nor_png_is_refused(corpus: Path, tmp_path: Path) -> None:
    """--plot act.svg wrote HTML into act.svg without a word."""
    import pytest

    s = collect(
        iter_transactions(
            BinlogSeries.open(corpus / "zalora-binlog-parser/gtid-fixtures/mysql-bin.01").events()
        )
    )
    with pytest.raises(ValueError, match=r"\.html or \.png"):
        write_plot(s, str(tmp_path / "act.svg"))
    assert not (tmp_path / "act.svg").exists()


def test_parallelism_counts_a_file_boundary_as_a_barrier(corpus: Path) -> None:
    """Newcomer: `binlake stats` of replicated-bin.000001 and .000002 (nine transactions, each one's
    last_committed the previous one's sequence_number: strictly serial) printed a logical-clock
    parallelism of 1.80. The logical clock restarts in every file, and a transaction of the second
    file (last_committed 0) can only start once the first file is applied (a replica's applier waits
    for every worker at the new file's FORMAT_DESCRIPTION): the chains of successive files add up,
    they do not run side by side. Nine serial transactions allow a parallelism of 1."""
    std = corpus / "mysql-server-8.0.39/std_data"
    series = BinlogSeries.open(std / "replicated-bin.000001", std / "replicated-bin.000002")
    txns = list(iter_transactions(series.events()))
    assert len(txns) == 9 and {t.file_seq for t in txns} == {0, 1}
    assert all(t.last_committed == t.sequence_number - 1 for t in txns)  # each waits for the one before
    s = collect(txns)
    assert s.critical_path == 9
    assert s.parallelism == 1.0
