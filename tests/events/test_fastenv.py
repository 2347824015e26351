"""The compiled event envelope (``binlake.events._fastenv``) gives exactly the events of the pure
path (``EventDecoder._decode_one``, the reference): every event of the real corpus and of generated
MySQL 8 and MariaDB series (types and every field, row values included), and on damaged input
(truncated files and events, bad checksums, bytes overwritten in the fixed parts and length fields of
GTID / QUERY / XID / TABLE_MAP / rows bodies) the same typed error with the same message at the same
file offset."""

from __future__ import annotations

import dataclasses
import random
import shutil
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake import decoder as decoder_module
from binlake import native
from binlake.decoder import EventDecoder
from binlake.errors import BinlogError
from binlake.events.types import EventType
from binlake.generate import generate
from binlake.globalbinlog.nodes import node_transactions
from binlake.reader import BinlogReader
from binlake.shardsim import CARRIERS, simulate
from tests.conftest import corpus_index
from tests.values.test_plan import exact

_fastenv = pytest.importorskip(
    "binlake.events._fastenv",
    reason="the compiled envelope is not built (no C compiler or Cython at install: pure only)",
)

RECORDS = corpus_index()["records"]


def test_the_build_is_current() -> None:
    """A build left from older sources is not used (pure instead): here it fails, to be rebuilt."""
    assert _fastenv.INTERFACE == decoder_module.ENVELOPE.interface, "stale build: ./dev setup"
    assert decoder_module.ENVELOPE.chosen


def test_the_crc32_is_zlibs() -> None:
    """The envelope's own CRC32 (eight bytes a step) equals ``zlib.crc32`` at every length up to
    300 bytes (every tail of the 8-byte loop), on 1 MB, and on all-zero and all-one bytes."""
    rng = random.Random(11)
    for n in range(301):
        for data in (rng.randbytes(n), b"\x00" * n, b"\xff" * n):
            assert _fastenv.crc32(data) == zlib.crc32(data), n
            buf = b"ab" + data + zlib.crc32(data).to_bytes(4, "little")  # as an event's footer
            assert _fastenv.crc_matches(buf, 2, len(buf))
    big = rng.randbytes(1 << 20)
    assert _fastenv.crc32(big) == zlib.crc32(big)


def deep(v: Any) -> Any:
    """``exact`` through dataclasses (events, headers, bodies, table maps; caches left out)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (
            type(v),
            tuple(deep(getattr(v, f.name)) for f in dataclasses.fields(v) if not f.name.startswith("_")),
        )
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return (type(v), tuple(deep(x) for x in v))
    if isinstance(v, dict):
        return (type(v), tuple((deep(k), deep(x)) for k, x in v.items()))
    return exact(v)


def outcome(events: Callable[[], Iterator[Any]]) -> tuple[list[Any], Any]:
    """Every event until the end or the first error, and the error (type, offset, message)."""
    got: list[Any] = []
    try:
        for ev in events():
            got.append(deep(ev))
    except BinlogError as e:
        return got, (type(e).__name__, e.offset, str(e))
    return got, None


def both_ways(events: Callable[[], Iterator[Any]]) -> tuple[list[Any], Any]:
    """The outcome with everything pure, then everything compiled: they must be equal."""
    got = []
    for on in (False, True):
        native.use_compiled(on)
        assert decoder_module.ENVELOPE.chosen == on
        try:
            got.append(outcome(events))
        finally:
            native.use_compiled(True)
    assert got[0][1] == got[1][1]
    assert len(got[0][0]) == len(got[1][0])
    for i, (a, b) in enumerate(zip(*[g[0] for g in got], strict=True)):
        assert a == b, f"event {i} differs"
    return got[1]


@pytest.mark.parametrize("rec", RECORDS or [{}], ids=[r["path"] for r in RECORDS] or ["no corpus"])
def test_corpus_reads_the_same_both_ways(corpus: Path, rec: dict) -> None:
    """(Without the corpus, the ``corpus`` fixture skips with its reason.)"""
    path = corpus / rec["path"]
    for verify in (True, False):
        both_ways(_reader(path, require_fde=False, verify_checksum=verify))


def _series(tmp_path: Path, flavor: str, size: int = 400_000) -> list[Path]:
    return generate(tmp_path, flavor=flavor, target_bytes=size, max_file_size=None).files


def _reader(path: Path, **options: Any) -> Callable[[], Iterator[Any]]:
    count = options.pop("count_rows", False)

    def events() -> Iterator[Any]:
        r = BinlogReader(path, **options)
        r.decoder.state.count_rows = count
        return iter(r)

    return events


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb", "mysql57"])
def test_generated_series_read_the_same_both_ways(tmp_path: Path, flavor: str) -> None:
    """Decoding rows, rows left as bytes, and rows counted (what ``stats`` reads)."""
    path = _series(tmp_path, flavor)[0]
    events, error = both_ways(_reader(path))
    assert error is None and len(events) > 1000
    both_ways(_reader(path, decode_rows=False))
    both_ways(_reader(path, decode_rows=False, count_rows=True))


def _frames(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of every event of a file's bytes."""
    out, pos = [], 4
    while pos + 19 <= len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        out.append((pos, size))
        pos += size
    return out


def test_truncated_files_fail_alike(tmp_path: Path) -> None:
    """The file cut inside every part of the first events of each kind: the same events, then the
    same ``IncompleteTailError`` at the same offset."""
    data = _series(tmp_path, "mysql80", 100_000)[0].read_bytes()
    frames = _frames(data)
    seen: set[int] = set()
    path = tmp_path / "cut.000001"
    for pos, size in frames[:60]:
        if data[pos + 4] in seen:
            continue
        seen.add(data[pos + 4])
        for cut in sorted(
            {pos + 1, pos + 18, pos + 19, pos + 25, pos + size // 2, pos + size - 4, pos + size - 1}
        ):
            path.write_bytes(data[:cut])
            both_ways(_reader(path))


def _with_crc(event: bytearray) -> bytes:
    struct.pack_into("<I", event, len(event) - 4, zlib.crc32(bytes(event[:-4])))
    return bytes(event)


# the event types whose bodies the compiled envelope reads itself
FAST_KINDS = {
    EventType.GTID,
    EventType.ANONYMOUS_GTID,
    EventType.QUERY,
    EventType.XID,
    EventType.TABLE_MAP,
    EventType.MARIA_GTID,
    EventType.WRITE_ROWS_V2,
    EventType.UPDATE_ROWS_V2,
    EventType.DELETE_ROWS_V2,
    EventType.WRITE_ROWS_V1,
    EventType.UPDATE_ROWS_V1,
    EventType.DELETE_ROWS_V1,
}


def _damaged(event: bytes, rng: random.Random) -> Iterator[bytes]:
    """Variants of one event: bytes overwritten (0, 0xff, random; CRC fixed so the body is read,
    and left stale), the body cut short (size and CRC fixed), a byte of a length field made huge."""
    n = len(event)
    for _ in range(40):
        bad = bytearray(event)
        at = rng.randrange(19, n - 4)
        bad[at] = rng.choice((0, 0xFF, 0xFB, 0xFC, 0xFE, rng.randrange(256)))
        if rng.random() < 0.5:
            bad[at + 1 : at + 4] = b"\xff\xff\xff"[: max(0, n - 4 - at - 1)]
        yield _with_crc(bad)
        yield bytes(bad)  # a stale checksum
    for cut in range(19, n - 4):
        short = bytearray(event[:cut] + event[-4:])
        struct.pack_into("<I", short, 9, len(short))
        yield _with_crc(short)


def _decode_outcome(dec: EventDecoder, raw: bytes, offset: int) -> Any:
    try:
        return [deep(e) for e in dec.decode(raw, offset)]
    except BinlogError as e:
        return (type(e).__name__, e.offset, str(e))


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb"])
def test_damaged_events_fail_alike(tmp_path: Path, flavor: str) -> None:
    """Each damaged variant of the first events of every kind the envelope reads, given to two
    decoders that have read the same events before it (one pure envelope, one compiled): the same
    event or the same typed error, message and offset; nothing read past an event."""
    data = _series(tmp_path, flavor, 120_000)[0].read_bytes()
    rng = random.Random(7)
    decoders = [EventDecoder("f"), EventDecoder("f")]
    done: dict[int, int] = {}
    compared = failures = 0
    try:
        for pos, size in _frames(data):
            raw = data[pos : pos + size]
            code = raw[4]
            if code in FAST_KINDS and done.get(code, 0) < 3:
                done[code] = done.get(code, 0) + 1
                for bad in _damaged(raw, rng):
                    got = []
                    for dec, on in zip(decoders, (False, True), strict=True):
                        decoder_module.ENVELOPE.choose(on)
                        got.append(_decode_outcome(dec, bad, pos))
                    assert got[0] == got[1], (EventType(code).name, bad.hex())
                    compared += 1
                    failures += isinstance(got[0], tuple)
            for dec, on in zip(decoders, (False, True), strict=True):
                decoder_module.ENVELOPE.choose(on)
                list(dec.decode(raw, pos))
    finally:
        decoder_module.ENVELOPE.choose(decoder_module.ENVELOPE.built is not None)
    assert compared > 1000 and failures > 100, (compared, failures)


def test_hostile_event_lengths_fail_alike(tmp_path: Path) -> None:
    """An event's length field overwritten (below the header, past the file, huge): the same error."""
    data = _series(tmp_path, "mysql80", 60_000)[0].read_bytes()
    path = tmp_path / "bad.000001"
    for pos, _ in _frames(data)[1:40:3]:
        for size in (0, 18, 19, 22, 23, 0x7FFFFFFF, 0xFFFFFFFF, len(data)):
            bad = bytearray(data)
            struct.pack_into("<I", bad, pos + 9, size)
            path.write_bytes(bytes(bad))
            both_ways(_reader(path))
    path.write_bytes(data)
    for ceiling in (19, 200, 500):  # events over the ceiling of what one event may make us hold
        both_ways(_reader(path, max_payload=ceiling))


def test_binlake_pure_forces_the_pure_envelope(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = "from binlake import decoder; print(decoder.ENVELOPE.chosen)"
    for env, want in (({"BINLAKE_PURE": "1"}, "False"), ({"BINLAKE_PURE": "0"}, "True")):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={**env, "PATH": ""}, check=True
        )
        assert out.stdout.strip() == want


def test_start_and_stop_positions_read_the_same_both_ways(tmp_path: Path) -> None:
    path = _series(tmp_path, "mysql80", 150_000)[0]
    frames = _frames(path.read_bytes())
    rng = random.Random(3)
    for _ in range(6):
        a, b = sorted(rng.sample([pos for pos, _ in frames[1:]], 2))
        both_ways(_reader(path, start_position=a, stop_position=b))
    both_ways(_reader(path, start_position=frames[5][0] + 1))  # not an event start: the same error


@pytest.mark.parametrize("carrier", CARRIERS)
def test_node_reading_is_the_same_both_ways(tmp_path: Path, carrier: str) -> None:
    """The merge's node reader (``globalbinlog.nodes``), on simulated nodes and on their files with
    bytes overwritten (it hands those over to the general reader): the same transactions, the same
    events in them, or the same error."""
    files = simulate(
        tmp_path / "sim", seed=5, nodes=2, transactions=120, carrier=carrier, max_file_size=20_000
    ).node_files[0]
    events, error = both_ways(lambda: node_transactions(files))
    assert error is None and len(events) > 40
    rng = random.Random(11)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    copies = [Path(shutil.copy(f, damaged / f.name)) for f in files]
    data = files[0].read_bytes()
    for _ in range(25):
        bad = bytearray(data)
        at = rng.randrange(4, len(bad))
        bad[at : at + 2] = rng.choice((b"\xff\xff", b"\x00\x00", bytes([rng.randrange(256)]) * 2))
        copies[0].write_bytes(bytes(bad))
        both_ways(lambda: node_transactions(copies))


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb"])
def test_clean_events_never_go_to_the_reference(
    tmp_path: Path, flavor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an intact series the compiled path reads every event itself but the layout's own
    (FORMAT_DESCRIPTION): nothing falls back to the pure decoder unnoticed (it would be equal, and slow)."""
    path = _series(tmp_path, flavor, 150_000)[0]
    calls: list[int] = []
    reference = EventDecoder._decode_one

    def counted(self: EventDecoder, raw: bytes, *args: Any, **kw: Any) -> Any:
        calls.append(raw[4])
        return reference(self, raw, *args, **kw)

    monkeypatch.setattr(EventDecoder, "_decode_one", counted)
    for options in ({}, {"decode_rows": False}, {"decode_rows": False, "count_rows": True}):
        calls.clear()
        assert sum(1 for _ in _reader(path, **options)()) > 500
        assert calls == [EventType.FORMAT_DESCRIPTION]


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb"])
def test_random_bodies_decode_alike(tmp_path: Path, flavor: str) -> None:
    """Random bodies of 0–90 bytes under each type the envelope reads (a valid header and CRC, so
    the body is what is read), after a real stream's layout and table maps: the same event or error."""
    data = _series(tmp_path, flavor, 30_000)[0].read_bytes()
    decoders = [EventDecoder("f"), EventDecoder("f")]
    try:
        for pos, size in _frames(data):
            for dec, on in zip(decoders, (False, True), strict=True):
                decoder_module.ENVELOPE.choose(on)
                list(dec.decode(data[pos : pos + size], pos))
        rng = random.Random(23)
        kinds = sorted(
            FAST_KINDS | {EventType.XA_PREPARE, EventType.POLARDBX_SEQUENCE, EventType.POLARDBX_GCN}
        )
        errors = 0
        for i in range(4000):
            code = rng.choice(kinds)
            body = bytes(
                rng.choice((0, 1, 2, 0xFB, 0xFC, 0xFE, 0xFF, rng.randrange(256)))
                for _ in range(rng.randrange(91))
            )
            event = bytearray(
                struct.pack("<IBIIIH", 1, code, 7, 19 + len(body) + 4, 0, 0) + body + b"\0\0\0\0"
            )
            raw = _with_crc(event)
            got = []
            for dec, on in zip(decoders, (False, True), strict=True):
                decoder_module.ENVELOPE.choose(on)
                got.append(_decode_outcome(dec, raw, 1000 + i))
            assert got[0] == got[1], (EventType(code).name, raw.hex())
            errors += isinstance(got[0], tuple)
    finally:
        decoder_module.ENVELOPE.choose(decoder_module.ENVELOPE.built is not None)
    assert errors > 300


def test_gtids_of_servers_taking_turns_name_each_its_own_source(tmp_path: Path) -> None:
    """The compiled GTID reader keeps the last source uuid's text: GTIDs whose source changes from
    one transaction to the next (a merged or failed-over binlog), read by two compiled decoders in
    turn over two files (the kept uuid is the module's, not a decoder's), name each its own source
    as the pure reader does."""
    data = _series(tmp_path, "mysql80", 60_000)[0].read_bytes()
    sources = [bytes([0x10 + k]) * 16 for k in range(3)]
    files, wanted = [], []
    for shift in (0, 1):
        out, want = bytearray(data), []
        gtids = [pos for pos, _ in _frames(data) if data[pos + 4] == EventType.GTID]
        assert len(gtids) > 20
        for i, pos in enumerate(gtids):
            raw = sources[(i * 7 // 3 + shift) % 3]  # runs of one source, then another
            size = int.from_bytes(data[pos + 9 : pos + 13], "little")
            out[pos + 20 : pos + 36] = raw
            out[pos : pos + size] = _with_crc(bytearray(out[pos : pos + size]))
            h = raw.hex()
            want.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
        path = tmp_path / f"turns{shift}.000001"
        path.write_bytes(bytes(out))
        files.append(path)
        wanted.append(want)
        both_ways(_reader(path))
    readers = [iter(BinlogReader(p)) for p in files]
    got: list[list[str]] = [[], []]
    for pairs in zip(*readers, strict=False):
        for k, ev in enumerate(pairs):
            if ev.kind == EventType.GTID:
                got[k].append(ev.body.sid)
    assert got == wanted
