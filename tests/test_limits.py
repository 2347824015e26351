"""Ceilings on what a length read from the input may make us allocate (issue #13, item 9): a
decompression bomb or a forged event length ends in ``SizeLimitError`` naming file and offset, having
held at most about the ceiling."""

from __future__ import annotations

import struct
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest
import zstandard

from binlake.errors import BinlogError, MalformedEventError, SizeLimitError
from binlake.events.payload import COMPRESSION_ZSTD, TransactionPayload, encode_transaction_payload
from binlake.events.types import EventType
from binlake.reader import BinlogReader
from binlake.sizes import DEFAULT_MAX_PAYLOAD, MAX_PAYLOAD_ENV, max_payload
from tests.test_fuzz import event, fde_file

MiB = 1 << 20
BOMB = 64 * MiB  # zeros: zstd packs them into a few KB


def _bomb_file(tmp_path: Path, claimed: int) -> Path:
    data = zstandard.ZstdCompressor().compress(b"\0" * BOMB)
    body = encode_transaction_payload(TransactionPayload(COMPRESSION_ZSTD, len(data), claimed, data))
    path = tmp_path / "bomb.bin"
    path.write_bytes(fde_file() + event(EventType.TRANSACTION_PAYLOAD, body, 200))
    return path


AT = len(fde_file())  # where the event after the format event starts


def _read(path: Path, error: type[BinlogError] = SizeLimitError, **kw: object) -> tuple[Any, int]:
    """The error reading ``path`` raises, and the peak bytes allocated on the way."""
    tracemalloc.start()
    try:
        with pytest.raises(error) as err:
            list(BinlogReader(path, **kw))  # type: ignore[arg-type]
        return err.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("claimed", [0, BOMB])  # unannounced, announced
def test_bomb_stops_at_the_ceiling(tmp_path: Path, claimed: int) -> None:
    """The zstd frame announces 64 MiB: it is not trusted, inflation stops one chunk past the 4 MiB
    ceiling."""
    err, peak = _read(_bomb_file(tmp_path, claimed), max_payload="4MiB")
    assert (err.source, err.offset, err.limit) == (str(tmp_path / "bomb.bin"), AT, 4 * MiB)
    assert "TRANSACTION_PAYLOAD" in str(err) and MAX_PAYLOAD_ENV in str(err)
    assert peak < 8 * MiB


def test_bomb_stops_at_an_understated_size(tmp_path: Path) -> None:
    """A header that says 100 bytes is the first wall: one chunk past it, the event is malformed."""
    err, peak = _read(_bomb_file(tmp_path, 100), MalformedEventError)
    assert err.offset == AT and "header says 100" in str(err)
    assert peak < 4 * MiB


def test_header_claiming_more_than_the_ceiling_is_refused_before_inflating(tmp_path: Path) -> None:
    """The reported case: a small file whose payload claims 2.5 GB."""
    err, peak = _read(_bomb_file(tmp_path, 5 << 29))
    assert err.size == 5 << 29 and err.limit == DEFAULT_MAX_PAYLOAD and err.offset == AT
    assert peak < 2 * MiB  # the read buffer


def test_env_sets_the_ceiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_PAYLOAD_ENV, "2MiB")
    assert max_payload() == 2 * MiB and max_payload(123) == 123
    err, _ = _read(_bomb_file(tmp_path, 0))
    assert err.limit == 2 * MiB
    monkeypatch.setenv(MAX_PAYLOAD_ENV, "-1")
    with pytest.raises(ValueError):
        max_payload()


def test_payload_under_the_ceiling_decodes(tmp_path: Path) -> None:
    """The ceiling is not an off-by-one away from real data: a payload of exactly the limit inflates."""
    inner = event(EventType.XID, struct.pack("<Q", 7), 0)
    p = TransactionPayload(COMPRESSION_ZSTD, 0, len(inner), zstandard.ZstdCompressor().compress(inner))
    assert bytes(p.uncompressed(len(inner))) == inner
    with pytest.raises(SizeLimitError):
        p.uncompressed(len(inner) - 1)


def test_event_length_over_the_ceiling(tmp_path: Path) -> None:
    """The reader checks an event's length against the ceiling before reading its body."""
    path = tmp_path / "big.bin"
    path.write_bytes(fde_file() + event(EventType.QUERY, b"\0" * 5000, 200))
    err, _ = _read(path, max_payload=4096)
    assert (err.offset, err.size, err.limit) == (AT, 19 + 5000, 4096)
    # header-only scans refuse it too: where a full read fails, a scan must not call the file whole
    # (or, at the end of the newest file, a tail to wait for: test_damaged_length_tail.py)
    err, _ = _read(path, max_payload=4096, skip=frozenset({EventType.QUERY}))
    assert err.offset == AT


def test_mariadb_compressed_event_claiming_too_much(tmp_path: Path) -> None:
    text = b"\x84" + (0xFFFFFFFF).to_bytes(4, "big") + zlib.compress(b"SELECT 1")
    body = struct.pack("<IIBHH", 1, 0, 1, 0, 0) + b"d\0" + text
    path = tmp_path / "mq.bin"
    path.write_bytes(fde_file() + event(EventType.MARIA_QUERY_COMPRESSED, body, 200))
    err, _ = _read(path)
    assert (err.offset, err.size) == (AT, 0xFFFFFFFF)
