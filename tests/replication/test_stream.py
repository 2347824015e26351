"""The dump stream, sans-I/O: real binlog files replayed as a server would send them."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from binlake.errors import ReplicationError
from binlake.events.types import FLAG_ARTIFICIAL, FLAG_BINLOG_IN_USE, EventType
from binlake.position import transaction_ends
from binlake.reader import BinlogReader
from binlake.replication.stream import EndOfStream, ReplicationStream, StreamEvent, file_number
from binlake.txn import UNFINISHED, iter_transactions
from binlake.wire import crc32

FILES = [
    "zalora-binlog-parser/gtid-fixtures/mysql-bin.01",  # MySQL 5.7, GTIDs
    "blackbeam-rust_mysql_common/transaction_compression.000001",  # MySQL 8.0, compressed
    "mariadb-server-10.3/std_data/rpl/master-bin-seq_10.3.36.000001",  # MariaDB GTIDs
]


def fake_rotate(name: str, position: int, checksum: bool) -> bytes:
    """The artificial ROTATE a dump starts with: timestamp 0, log_pos 0, flagged artificial."""
    body = struct.pack("<Q", position) + name.encode()
    size = 19 + len(body) + (4 if checksum else 0)
    raw = struct.pack("<IBIIIH", 0, EventType.ROTATE, 1, size, 0, FLAG_ARTIFICIAL) + body
    return raw + struct.pack("<I", crc32(raw)) if checksum else raw


def server_events(path: Path) -> list[tuple[int, bytes]]:
    data = path.read_bytes()
    return [
        (e.offset, data[e.offset : e.offset + e.header.event_size])
        for e in BinlogReader(path)
        if e.inner_index is None
    ]


def ok(raw: bytes) -> bytes:
    return b"\x00" + raw


@pytest.mark.parametrize("name", FILES)
def test_whole_file_as_a_dump(corpus: Path, name: str) -> None:
    path = corpus / name
    events = server_events(path)
    checksum = any(e.checksum is not None for e in BinlogReader(path))
    stream = ReplicationStream(file=path.name, position=4)
    resumes = []
    items = [stream.receive(ok(fake_rotate(path.name, 4, checksum)))]
    for _, raw in events:
        items.append(stream.receive(ok(raw)))
        resumes.append(stream.resume.position)
    assert isinstance(items[0], StreamEvent) and not items[0].in_file
    written = [it for it in items if isinstance(it, StreamEvent) and it.in_file]
    # every event of the file is recognised as the file's, at its offset, bytes untouched
    assert [(it.start, it.raw) for it in written] == events
    assert (
        b"\xfebin" + b"".join(it.raw for it in written)
        == path.read_bytes()[: 4 + sum(len(r) for _, r in events)]
    )
    # the resume point never falls inside a transaction, and reaches every transaction's end
    txns = [t for t in iter_transactions((0, e) for e in BinlogReader(path)) if t.kind != UNFINISHED]
    assert txns
    for p in resumes:
        assert not any(t.start < p < t.end for t in txns), p
    assert {t.end for t in txns} <= set(resumes)
    assert set(transaction_ends(path)) <= set(resumes) | {events[-1][0] + len(events[-1][1])}
    finished = stream.take_transactions()
    assert [t.gtid for t in finished] == [t.gtid for t in txns]


@pytest.mark.parametrize("name", FILES)
def test_dump_from_the_middle_of_a_file(corpus: Path, name: str) -> None:
    """Started inside a file, the server sends a fake ROTATE, the FORMAT_DESCRIPTION with log_pos 0
    and the in-use flag cleared (not the file's bytes there), then the events from the position."""
    path = corpus / name
    events = server_events(path)
    checksum = any(e.checksum is not None for e in BinlogReader(path))
    txns = [t for t in iter_transactions((0, e) for e in BinlogReader(path)) if t.kind != UNFINISHED]
    at = txns[len(txns) // 2].start
    fde = bytearray(events[0][1])
    struct.pack_into("<IH", fde, 13, 0, struct.unpack_from("<H", fde, 17)[0] & ~FLAG_BINLOG_IN_USE)
    if checksum:
        struct.pack_into("<I", fde, len(fde) - 4, crc32(bytes(fde[:-4])))
    stream = ReplicationStream(file=path.name, position=at)
    stream.receive(ok(fake_rotate(path.name, at, checksum)))
    first = stream.receive(ok(bytes(fde)))
    assert isinstance(first, StreamEvent) and not first.in_file
    rest = [stream.receive(ok(raw)) for off, raw in events if off >= at]
    assert all(isinstance(it, StreamEvent) and it.in_file for it in rest)
    assert [t.gtid for t in stream.take_transactions()] == [t.gtid for t in txns if t.start >= at]


def test_server_errors_and_end_of_stream() -> None:
    stream = ReplicationStream(file="mysql-bin.000007", position=120, server="db1:3306")
    with pytest.raises(ReplicationError) as e:
        stream.receive(b"\xff" + struct.pack("<H", 1236) + b"#HY000Could not find first log file name")
    assert e.value.code == 1236 and e.value.offset == 120
    assert "db1:3306" in str(e.value) and "mysql-bin.000007:120" in str(e.value)
    end = stream.receive(b"\xfe\x00\x00\x02\x00")
    assert isinstance(end, EndOfStream) and (end.file, end.position) == ("mysql-bin.000007", 120)
    with pytest.raises(ReplicationError, match="unexpected packet 0x07"):
        stream.receive(b"\x07abc")


def test_file_number() -> None:
    assert file_number("mariadb-bin.000042") == 42 and file_number("binlog") == 0
