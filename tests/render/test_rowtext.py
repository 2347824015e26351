"""The per-layout row formatter equals the per-value reference, line for line, on every rows event
of the corpus and of generated all-types series (MySQL 8 with full metadata, MariaDB)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake.errors import BinlogError
from binlake.events.base import Event
from binlake.events.rows import Rows
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.render.text import reference_rows_lines, rows_lines
from tests.conftest import CORPUS, corpus_index

OPTIONS = [(2, False), (2, True), (1, False)]  # (verbosity, positional)


def rows_events(path: Path) -> Iterator[Event]:
    try:
        for ev in BinlogReader(path):
            if isinstance(ev.body, Rows):
                yield ev
    except BinlogError:
        return  # damaged or encrypted files end with their own error (tests/test_corpus.py)


def assert_same(events: Iterator[Event]) -> int:
    compared = 0
    for ev in events:
        for verbosity, positional in OPTIONS:
            want = list(reference_rows_lines(ev.body, verbosity, positional))
            got = list(rows_lines(ev.body, verbosity, positional))
            assert got == want, f"{ev.source}:{ev.offset} (verbosity {verbosity}, positional {positional})"
        compared += len(ev.body.rows)
    return compared


def test_corpus_rows_format_as_the_reference(corpus: Path) -> None:
    records = [r for r in corpus_index()["records"] if r.get("events")]
    compared = sum(assert_same(rows_events(CORPUS / r["path"])) for r in records)
    assert compared > 10_000


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb"])
def test_generated_all_types_format_as_the_reference(tmp_path: Path, flavor: str) -> None:
    result = generate(tmp_path, flavor=flavor, target_bytes=1_500_000, max_file_size=None)
    compared = sum(assert_same(rows_events(f)) for f in result.files)
    assert compared > 1_000


def test_negative_and_quoted_values_take_the_reference_path(corpus: Path) -> None:
    """Signed negatives print ``-1 (255)`` and control bytes ``\\x0a``: both must appear in what the
    formatter was compared on, or the inline fast paths were never put to the test."""
    text = "\n".join(
        line
        for r in corpus_index()["records"]
        if r.get("events")
        for ev in rows_events(CORPUS / r["path"])
        for line in rows_lines(ev.body)
    )
    assert re.search(r"=-\d+ \(\d+\)", text) and "\\x0" in text


@pytest.mark.parametrize("names", [8, 9, 16, 64])
def test_a_set_prints_its_stored_bytes_in_order(names: int) -> None:
    """mysqlbinlog and mariadb-binlog print a SET's little-endian stored bytes in order, each high
    bit first (not the mask as one number): checked with both on MySQL 9 (test_crosscheck_mysqlbinlog)."""
    from binlake.render.values import text_value
    from binlake.values.columns import ColumnDef
    from binlake.values.types import ColumnType

    size = (names + 7) // 8
    meta = (ColumnType.SET << 8) | size
    col = ColumnDef(0, ColumnType.STRING, meta, True, set_values=[f"s{i}" for i in range(names)])
    chosen = ("s0", f"s{names - 1}")
    stored = (1 | 1 << (names - 1)).to_bytes(size, "little")
    want = "b'" + "".join(f"{b:08b}" for b in stored) + "'"
    assert text_value(chosen, col) == want
    assert text_value(1 | 1 << (names - 1), col) == want  # a mask without names
    if names == 16:
        assert want == "b'0000000110000000'"


def test_a_partial_json_path_cannot_end_the_comment_line() -> None:
    """A JSON path is binlog text like any value: a control byte in it (a crafted binlog; a server
    escapes them) is written escaped, so the ``###`` line never ends early and no line after it is
    SQL a client would run; the compiled formatter writes the same."""
    from binlake.events.rows import JsonDiff, PartialJson
    from binlake.render.values import text_value
    from binlake.values.columns import ColumnDef
    from binlake.values.types import ColumnType

    col = ColumnDef(1, ColumnType.JSON, 4, True)
    value = PartialJson([JsonDiff("INSERT", '$."a\nDROP TABLE x; -- b"', 1), JsonDiff("REMOVE", "$.c")])
    text = text_value(value, col)
    assert text == "JSON_REMOVE(JSON_INSERT(@2, '$.\"a\\x0aDROP TABLE x; -- b\"', 1), '$.c')"


def test_a_column_name_with_a_newline_stays_inside_its_comment_line(mariadb: Any) -> None:
    """MySQL and MariaDB allow a newline in a column name; dump text written for a SQL client must
    not let it end the ``###`` line (what followed it ran as SQL)."""
    from tests.render.pinned import run_cli

    hostile = "c\nDROP DATABASE hn; --"
    mariadb.execute(
        "DROP DATABASE IF EXISTS hn",
        "CREATE DATABASE hn",
        f"CREATE TABLE hn.t (`{hostile}` INT PRIMARY KEY, v INT)",
        "INSERT INTO hn.t VALUES (1, 2)",
        f"UPDATE hn.t SET `{hostile}` = 3",
    )
    files = [str(f) for f in mariadb.flush_binlogs()[-2:-1]]
    lines = run_cli(["dump", "-v", "2", *files])[1].decode().split("\n")
    assert not [line for line in lines if line.startswith("DROP DATABASE hn; --`=")]
    label = "###   `c\\x0aDROP DATABASE hn; --`="
    assert [line.split(" /*")[0] for line in lines if line.startswith(label)] == [label + v for v in "113"]
