"""A damaged event length at the end of the newest file (0xFFFFFFFF, over the 1 GiB ceiling) is not
an event still being written: no growth of the file can ever make it readable. The reader, the tail
scan, the live merge's node reader and `tail`'s completeness check all say so with a typed error
naming file and offset — before, they took it for an incomplete tail and a live merge/sync waited
forever."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.errors import SizeLimitError
from binlake.events.base import HEADER_V4
from binlake.events.types import EventType
from binlake.globalbinlog.merge import node_transactions
from binlake.position import TailScan
from binlake.reader import BinlogReader
from binlake.shardsim import ScriptedCluster
from binlake.tail import complete_end


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, int]:
    """A node binlog with two complete transactions, then one event header whose length is 0xFFFFFFFF."""
    c = ScriptedCluster(tmp_path / "sim", nodes=2)
    for i in range(2):
        c.local(c.txn("LOCAL", [(0, "G1", {1 + i: -1, 5 + i: 1})]))
    (files, _) = c.finish().node_files
    path = tmp_path / "binlog.000001"
    data = files[0].read_bytes()
    if data[-23 + 4] == EventType.STOP:  # the simulator closed it: the damage comes where STOP was
        data = data[:-23]
    path.write_bytes(data + HEADER_V4.pack(0, EventType.QUERY, 1, 0xFFFFFFFF, 0, 0))
    return path, len(data)


def test_the_reader_names_file_and_offset(damaged: tuple[Path, int]) -> None:
    path, at = damaged
    read = []
    with pytest.raises(SizeLimitError, match="over the .*ceiling") as err:
        for ev in BinlogReader(path):
            read.append(ev)
    assert (err.value.source, err.value.offset, err.value.size) == (str(path), at, 0xFFFFFFFF)
    assert read and read[-1].end_offset == at  # everything before it came out


def test_header_only_scans_and_the_tail_check_agree(damaged: tuple[Path, int]) -> None:
    path, at = damaged
    with pytest.raises(SizeLimitError) as err:
        TailScan(path).finish()
    assert err.value.offset == at
    with pytest.raises(SizeLimitError):
        complete_end(TailScan(path), active=True)  # the active file: still not a tail to wait for
    with pytest.raises(SizeLimitError):
        list(BinlogReader(path, skip=frozenset({EventType.QUERY})))


def test_a_live_merge_fails_instead_of_waiting(damaged: tuple[Path, int]) -> None:
    path, at = damaged
    with pytest.raises(SizeLimitError) as err:
        list(node_transactions([path]))
    assert (err.value.source, err.value.offset) == (str(path), at)


def test_a_tail_cut_short_still_waits(damaged: tuple[Path, int]) -> None:
    """The contrast: a length within the ceiling that the file does not hold yet is a tail to wait for."""
    path, at = damaged
    data = path.read_bytes()[:at] + HEADER_V4.pack(0, EventType.QUERY, 1, 500, 0, 0)
    path.write_bytes(data)
    scan = TailScan(path).finish()
    assert (scan.unfinished, scan.unfinished_at) == ("an event cut short", at)
    assert complete_end(TailScan(path), active=True) == scan.boundary
    assert len(list(node_transactions([path]))) == 2
