"""Rows counted by their lengths alone (what ``binlake stats`` reads) equal the rows decoded, event by
event, on every corpus file and on generated MySQL 8 / MariaDB series of every column type; and the
statistics from counted rows equal those from decoded rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.cli.reading import ReadOptions, selected_transactions
from binlake.errors import BinlogError
from binlake.events.rows import Rows
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.stats import collect
from tests.conftest import corpus_index


def rows_events(path: Path, count_only: bool) -> list[Rows]:
    reader = BinlogReader(path, require_fde=False)
    reader.decoder.state.decode_rows = not count_only
    reader.decoder.state.count_rows = count_only
    out = []
    try:
        for ev in reader:
            if isinstance(ev.body, Rows):
                out.append(ev.body)
    except BinlogError:
        pass  # a damaged file: compare what both read up to there
    return out


def assert_counts_equal(path: Path) -> int:
    decoded, counted = rows_events(path, False), rows_events(path, True)
    assert len(decoded) == len(counted), path
    for d, c in zip(decoded, counted, strict=True):
        assert c.row_total == d.row_total, (path, d.table_id)
        assert (c.undecoded_reason is None) == (d.undecoded_reason is None) or c.counted is not None
    return len(decoded)


def test_corpus_counts_equal_decoded(corpus: Path) -> None:
    files = [corpus / r["path"] for r in corpus_index()["records"] if r.get("events")]
    assert sum(assert_counts_equal(f) for f in files) > 1000


@pytest.fixture(scope="module", params=["mysql80", "mariadb"])
def series(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp(request.param)
    generate(out, flavor=request.param, target_bytes=600_000, max_file_size=300_000)
    return sorted(out.glob("*.0*"))


def test_generated_counts_equal_decoded(series: list[Path]) -> None:
    assert sum(assert_counts_equal(f) for f in series) > 100


def test_stats_of_counted_rows_equal_decoded(series: list[Path]) -> None:
    read = ReadOptions(files=tuple(str(f) for f in series))
    counted = collect(selected_transactions(read, streams_output=False, count_only=True))
    decoded = collect(selected_transactions(read, streams_output=False))
    assert counted == decoded and counted.rows > 100
