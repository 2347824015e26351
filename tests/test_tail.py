"""A live server's binlog directory, on a real two-file series: the active (last) file is read up to
its last complete transaction wherever it is cut; an earlier file cut short, a file that is not a
binlog, or a file linking outside the directory is a clear error."""

from __future__ import annotations

import json
import shutil
from collections import deque
from pathlib import Path

import pytest

from binlake.errors import BadMagicError, BinlogError, IncompleteTailError
from binlake.position import TailScan
from binlake.reader import BinlogReader
from binlake.series import SeriesError, closes_cleanly, series_files
from binlake.tail import check_source, complete_end, still_writing
from binlake.txn import UNFINISHED, TransactionGrouper

REAL = "mysql-server-8.0.39/std_data/replicated-bin"  # .000001 ends with ROTATE, .000002 with STOP


@pytest.fixture
def series(corpus: Path, tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    for n in (1, 2):
        shutil.copyfile(corpus / f"{REAL}.00000{n}", d / f"replicated-bin.00000{n}")
    return d


def committed(path: Path, stop: int | None = None) -> list[tuple[int, str | None]]:
    """(end offset, GTID) of each complete transaction of a file read up to ``stop``."""
    g = TransactionGrouper(keep_events=False)
    done = [t for ev in BinlogReader(path, stop_position=stop) for t in g.feed(0, ev)]
    return [(t.end, t.gtid) for t in done if t.kind != UNFINISHED]


def test_active_file_cut_anywhere_reads_exactly_its_complete_transactions(series: Path) -> None:
    last = series / "replicated-bin.000002"
    whole = last.read_bytes()
    truth = committed(last)
    assert len(truth) == 4
    for cut in range(4, len(whole) + 1):  # every byte: inside headers, bodies, between events
        last.write_bytes(whole[:cut])
        end = complete_end(TailScan(last), active=True)
        assert end is None or end == max([e for e, _ in truth if e <= cut], default=4)
        # reading up to where the scan says never meets the cut event (no IncompleteTailError)
        assert committed(last, end) == [(e, gtid) for e, gtid in truth if e <= cut], cut
    assert end is None  # the whole file: nothing unfinished


def test_warning_names_the_file_and_where_reading_stops(series: Path) -> None:
    last = series / "replicated-bin.000002"
    second_end = committed(last)[1][0]
    last.write_bytes(last.read_bytes()[: second_end + 30])  # inside the third transaction's GTID event
    scan = TailScan(last)
    assert complete_end(scan, active=True) == second_end
    assert still_writing(scan) == (
        f"{last} is still being written (an event cut short at offset {second_end}): "
        f"reading up to offset {second_end}, the end of its last complete transaction"
    )


def test_a_rotated_file_cut_short_is_an_error(series: Path) -> None:
    first = series / "replicated-bin.000001"
    whole = first.read_bytes()
    xid = next(ev.offset for ev in BinlogReader(first) if ev.type_name == "XID")
    assert check_source(str(series)) == [first, series / "replicated-bin.000002"]
    for cut, what in ((xid, "a transaction without its commit"), (xid + 5, "an event cut short")):
        first.write_bytes(whole[:cut])  # at an event boundary inside a transaction, inside an event
        with pytest.raises(IncompleteTailError, match="a rotated file never grows") as e:
            check_source(str(series))
        assert str(e.value).startswith(f"{first}, offset ") and what in str(e.value)
        assert "\n" not in str(e.value)


def test_closes_cleanly_is_only_said_of_files_ending_with_rotate_or_stop(corpus: Path, series: Path) -> None:
    """The O(1) check never calls a file closed whose last event is not a ROTATE/STOP ending it."""
    assert closes_cleanly(series / "replicated-bin.000001") and closes_cleanly(
        series / "replicated-bin.000002"
    )
    said = 0
    for record in json.loads((corpus / "index.json").read_text())["records"]:
        path = corpus / record["path"]
        if not closes_cleanly(path):
            continue
        said += 1
        try:
            last = deque(BinlogReader(path, decode_rows=False, require_fde=False), maxlen=1).pop()
        except BinlogError:
            continue  # damaged upstream (in its middle): its tail may still be intact
        assert last.type_name in ("ROTATE", "STOP"), path
        assert last.end_offset == path.stat().st_size, path
    assert said > 20
    last_file = series / "replicated-bin.000002"
    last_file.write_bytes(last_file.read_bytes()[:-1])
    assert not closes_cleanly(last_file)


def test_a_symlink_out_of_the_directory_is_refused(series: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    second = series / "replicated-bin.000002"
    shutil.move(second, outside / second.name)
    second.symlink_to(outside / second.name)
    with pytest.raises(SeriesError, match=f"a symlink to {outside / second.name}, outside {series}"):
        check_source(str(series))
    with pytest.raises(SeriesError, match="outside"):  # a glob over the directory too
        series_files(str(series / "replicated-bin.*"))
    second.unlink()
    (series / "real").mkdir()
    shutil.move(outside / second.name, series / "real" / second.name)
    second.symlink_to(series / "real" / second.name)  # a link inside the directory is fine
    assert check_source(str(series))[-1] == second
    (series / "replicated-bin.index").write_text(f"./replicated-bin.000001\n{outside}/other-bin.000001\n")
    with pytest.raises(SeriesError, match="listed as .*outside"):  # so is an index line leading out
        check_source(str(series))


def test_a_file_that_is_not_a_binlog_is_refused(series: Path) -> None:
    (series / "replicated-bin.000003").write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(BadMagicError, match="replicated-bin.000003.*not a binlog file"):
        check_source(str(series))
    (series / "replicated-bin.000003").write_bytes(b"\xfeb")  # a file the server is creating
    assert len(check_source(str(series))) == 3
    (series / "replicated-bin.000004").write_bytes(b"")  # no longer the active one: not a binlog
    with pytest.raises(BadMagicError, match="replicated-bin.000003"):
        check_source(str(series))


def test_a_missing_source_is_a_series_error(tmp_path: Path) -> None:
    with pytest.raises(SeriesError, match="missing binlog file"):
        check_source(str(tmp_path / "nope"))
    with pytest.raises(SeriesError, match="no binlog files match"):
        check_source(str(tmp_path / "nope*"))
