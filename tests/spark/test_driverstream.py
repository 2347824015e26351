"""The driver-side stream reader without Spark: bounded batches over a backlog (scanning only what
they return), a replay that cannot see its files fails loudly, a reset series is an error."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from binlake.errors import BinlogError
from binlake.generate import generate
from binlake.schema.ddlpass import DdlPass
from binlake.spark.changelog import file_changes
from binlake.spark.driverstream import DriverStreamReader


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return generate(
        tmp_path_factory.mktemp("ds") / "bin", seed=4, target_bytes=400_000, max_file_size=60_000, ddl_every=10
    )


def test_a_backlog_in_bounded_batches_equals_one_read(series: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    resets = []
    original = DdlPass.reset
    monkeypatch.setattr(DdlPass, "reset", lambda self: (resets.append(1), original(self))[1])
    reader = DriverStreamReader({"path": str(series.files[0].parent), "maxbatchbytes": "25KB"})
    start, rows, batches = reader.initialOffset(), 0, 0
    while True:
        it, end = reader.read(start)
        got = list(it)
        if end == start:
            assert not got
            break
        replay = list(reader.readBetweenOffsets(start, end))
        assert [b.num_rows for b in replay] == [b.num_rows for b in got]
        rows += sum(b.num_rows for b in got)
        batches += 1
        start = end
    total = sum(f.stat().st_size for f in series.files)
    assert batches >= total // 25_000
    assert rows == sum(1 for f in series.files for _ in file_changes(f))
    assert len(resets) <= 1  # the DDL pass moves forward with the batches, never back to the start


def test_a_replay_that_cannot_see_its_files_fails(series: Any, tmp_path: Path) -> None:
    reader = DriverStreamReader({"path": str(tmp_path / "elsewhere")})
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(series.files[0], tmp_path / "elsewhere")
    start, end = {"file": series.files[0].name, "pos": 4}, {"file": series.files[1].name, "pos": 400}
    with pytest.raises(BinlogError, match=f"{series.files[1].name} not found"):
        list(reader.readBetweenOffsets(start, end))


def test_a_series_that_ends_before_the_offset_is_an_error(series: Any, tmp_path: Path) -> None:
    d = tmp_path / "reset"
    d.mkdir()
    shutil.copy(series.files[0], d)
    reader = DriverStreamReader({"path": str(d)})
    with pytest.raises(BinlogError, match="end before this stream's offset"):
        reader.read({"file": series.files[2].name, "pos": 4})
