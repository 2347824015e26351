"""Packet framing and the replica's command payloads, sans-I/O."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.events.gtid import PreviousGtids
from binlake.gtid import GtidSet
from binlake.reader import BinlogReader
from binlake.replication.client import encode_gtid_set
from binlake.replication.packets import (
    MAX_PACKET,
    PacketError,
    PacketReader,
    binlog_dump,
    binlog_dump_gtid,
    frame,
    is_eof,
    parse_err,
    register_slave,
)


def _chunks(data: bytes, rng: random.Random) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        n = rng.choice([1, 3, 4, 5, 1000, 1 << 16, 1 << 22])
        out.append(data[pos : pos + n])
        pos += n
    return out


@given(st.lists(st.binary(max_size=300), max_size=8), st.integers(0, 2**32))
@settings(max_examples=200)
def test_small_payloads_survive_any_chunking(payloads: list[bytes], seed: int) -> None:
    wire = b"".join(frame(p, i) for i, p in enumerate(payloads))
    reader = PacketReader()
    got: list[bytes] = []
    for chunk in _chunks(wire, random.Random(seed)):
        reader.feed(chunk)
        got += reader.payloads()
    assert got == payloads
    assert reader.buffered == 0


@pytest.mark.parametrize(
    "size", [MAX_PACKET - 1, MAX_PACKET, MAX_PACKET + 1, 2 * MAX_PACKET, 2 * MAX_PACKET + 7]
)
def test_payloads_of_16_mib_and_more_are_split_and_joined(size: int) -> None:
    payload = bytes(random.Random(size).getrandbits(8) for _ in range(64)) * (size // 64) + b"x" * (size % 64)
    wire = frame(payload, 5)
    packets = []
    pos = 0
    while pos < len(wire):
        n = int.from_bytes(wire[pos : pos + 3], "little")
        packets.append((n, wire[pos + 3]))
        pos += 4 + n
    # full packets, then a shorter one (empty when the size is a multiple of 0xFFFFFF)
    assert all(n == MAX_PACKET for n, _ in packets[:-1]) and packets[-1][0] < MAX_PACKET
    assert [s for _, s in packets] == [(5 + i) & 0xFF for i in range(len(packets))]
    reader = PacketReader()
    got: list[bytes] = []
    for chunk in _chunks(wire, random.Random(1)):
        reader.feed(chunk)
        got += reader.payloads()
    assert len(got) == 1 and got[0] == payload


def test_out_of_step_sequence_inside_a_split_payload_is_an_error() -> None:
    wire = bytearray(frame(b"a" * (MAX_PACKET + 3), 0))
    wire[4 + MAX_PACKET + 3] = 9  # second packet should be 1
    reader = PacketReader()
    reader.feed(bytes(wire))
    with pytest.raises(PacketError, match="sequence 9 after 0"):
        reader.payloads()


def test_err_and_eof_packets() -> None:
    err = parse_err(b"\xff" + struct.pack("<H", 1236) + b"#HY000" + b"Could not find first log file name")
    assert (err.code, err.state, err.message) == (1236, "HY000", "Could not find first log file name")
    assert "1236" in str(err) and "HY000" in str(err)
    assert is_eof(b"\xfe\x00\x00\x02\x00") and not is_eof(b"\xfe" + b"\x00" * 30)
    with pytest.raises(PacketError):
        parse_err(b"\x00")


def test_command_layouts() -> None:
    # COM_BINLOG_DUMP: command, position u32, flags u16, server id u32, file name to the end
    assert binlog_dump(77, "mysql-bin.000003", 1234, 1) == (
        b"\x12" + struct.pack("<IHI", 1234, 1, 77) + b"mysql-bin.000003"
    )
    with pytest.raises(ValueError, match="position"):
        binlog_dump(1, "f", 1 << 32)
    # COM_REGISTER_SLAVE: server id, three length-prefixed strings, port, rank, master id
    assert register_slave(5, "h", "u", "", 3307) == (
        b"\x15" + struct.pack("<I", 5) + b"\x01h\x01u\x00" + struct.pack("<HII", 3307, 0, 0)
    )
    # COM_BINLOG_DUMP_GTID: flags (through GTID), server id, name length, name, position u64, data
    data = b"\x00" * 8
    assert binlog_dump_gtid(9, data, "f.1", 4) == (
        b"\x1e" + struct.pack("<HII", 4, 9, 3) + b"f.1" + struct.pack("<QI", 4, 8) + data
    )


GTID_FILES = [
    "mysql-server-8.0.39/std_data/replicated-bin.000002",
    "zalora-binlog-parser/gtid-fixtures/mysql-bin.01",
    "blackbeam-rust_mysql_common/binlog_transaction_with_GTID_TAG.000001",
]


@pytest.mark.parametrize("name", GTID_FILES)
def test_gtid_set_encoding_equals_what_servers_wrote(corpus: Path, name: str) -> None:
    """COM_BINLOG_DUMP_GTID carries a GTID set in the layout of a PREVIOUS_GTIDS body: our encoding
    of the set a real server (5.7, 8.0, 9.6 with tags) wrote must be those very bytes."""
    path = corpus / name
    ev = next(e for e in BinlogReader(path) if isinstance(e.body, PreviousGtids))
    raw = path.read_bytes()[ev.offset : ev.offset + ev.header.event_size]
    body = raw[19 : len(raw) - (4 if ev.checksum is not None else 0)]
    gtids = GtidSet.from_dict(ev.body.sets)
    assert gtids
    assert encode_gtid_set(gtids) == body
