"""Arbitrary bytes never make the decoder raise anything but BinlogError, hang, or allocate without
bound: after a valid FORMAT_DESCRIPTION, inside every event type, and as mutations of real files."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.decoder import EventDecoder
from binlake.errors import BinlogError
from binlake.events import BODY_DECODERS
from binlake.events.base import HEADER_V4
from binlake.reader import BinlogReader
from binlake.wire import crc32

FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
MAX_PEAK = 64 << 20  # bytes a single malformed file may make us allocate

POST_HEADER_80 = bytes([0, 13, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 98, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0, 10, 10, 10, 42, 42, 0, 18, 52, 0, 0, 0, 0])  # fmt: skip
FDE_80 = (
    struct.pack("<H", 4)
    + b"8.0.30".ljust(50, b"\0")
    + struct.pack("<I", 0)
    + b"\x13"
    + POST_HEADER_80
    + b"\x00"  # checksum off, so arbitrary bytes reach the body decoders
)


def event(type_code: int, body: bytes, pos: int, crc: bool = False) -> bytes:
    size = 19 + len(body) + (4 if crc else 0)
    head = HEADER_V4.pack(0, type_code, 1, size, pos + size, 0)
    return head + body + (struct.pack("<I", crc32(head + body)) if crc else b"")


def fde_file() -> bytes:
    return b"\xfebin" + event(15, FDE_80, 4, crc=True)  # the FDE carries a CRC32 even with checksums off


def read_all(path: Path, **kw: object) -> int:
    n = 0
    try:
        for _ in BinlogReader(path, **kw):  # type: ignore[arg-type]
            n += 1
    except BinlogError:
        pass
    return n


@FUZZ
@given(tail=st.binary(max_size=4096))
def test_arbitrary_bytes_after_fde(tmp_path_factory, tail: bytes) -> None:
    path = tmp_path_factory.mktemp("fz") / "f.bin"
    path.write_bytes(fde_file() + tail)
    assert read_all(path) >= 1


@FUZZ
@given(code=st.sampled_from(sorted(BODY_DECODERS)), body=st.binary(max_size=512))
def test_arbitrary_body_for_every_event_type(code: int, body: bytes) -> None:
    dec = EventDecoder("fuzz")
    list(dec.decode(event(15, FDE_80, 4, crc=True), 4))
    # give rows events a table to decode against
    tm = (
        (7).to_bytes(6, "little")
        + b"\0\0\x01d\0\x01t\0\x04"
        + bytes([3, 15, 246, 245])
        + b"\x05"
        + b"\x10\x00\x0a\x02\x04"
        + b"\x0f"
    )
    list(dec.decode(event(19, tm, 200), 200))
    try:
        list(dec.decode(event(code, body, 300), 300))
    except BinlogError as e:
        assert e.offset == 300 and e.source == "fuzz"


def _corpus_files(corpus: Path) -> list[Path]:
    names = [
        "osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32",
        "blackbeam-rust_mysql_common/json.binlog.000001",
        "osheroff-mysql-binlog-connector-java/mysql-bin.compressed",
        "mariadb-server-10.3/std_data/rpl/master-bin-seq_10.3.36.000001",
        "blackbeam-rust_mysql_common/mysql-enum-string-set.000001",
        "blackbeam-rust_mysql_common/vector.binlog",
    ]
    return [corpus / n for n in names]


@settings(
    max_examples=200,
    deadline=3000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_mutated_real_files(corpus: Path, tmp_path: Path, data: st.DataObject) -> None:
    src = data.draw(st.sampled_from(_corpus_files(corpus)))
    raw = bytearray(src.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(4, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(4, len(raw)))]
    path = tmp_path / "m.bin"
    path.write_bytes(bytes(raw))
    tracemalloc.start()
    try:
        read_all(path, verify_checksum=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_PEAK


def test_forged_payload_size_does_not_inflate(tmp_path: Path) -> None:
    """A TRANSACTION_PAYLOAD whose header claims 4 GiB is refused without allocating it."""
    import zstandard

    data = zstandard.ZstdCompressor().compress(b"\0" * 100000)
    fields = (
        b"\x02\x01\x00"
        + b"\x03\x09\xfe"
        + (1 << 32).to_bytes(8, "little")
        + b"\x01\x01"
        + bytes([len(data) if len(data) < 251 else 0])
        + b"\x00"
    )
    path = tmp_path / "p.bin"
    path.write_bytes(fde_file() + event(40, fields + data, 200))
    tracemalloc.start()
    read_all(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < MAX_PEAK
