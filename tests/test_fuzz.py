"""Arbitrary bytes never make the decoder raise anything but BinlogError, hang, or allocate without
bound: after a valid FORMAT_DESCRIPTION, inside every event type, and as mutations of real files.

The campaign below is reproducible (fixed seed; a failure names file, seed and mutant index) and
takes seconds; ``BINLAKE_FUZZ_SEED`` / ``BINLAKE_FUZZ_RUNS`` explore further. Each crasher it finds is
fixed as a class in its own module, gets a hand-built test here, and stays in ``REGRESSIONS``."""

from __future__ import annotations

import os
import resource
import signal
import struct
import traceback
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.decoder import EventDecoder
from binlake.errors import BinlogError, MalformedEventError
from binlake.events import BODY_DECODERS
from binlake.events.base import HEADER_V4
from binlake.events.rows import ABSENT
from binlake.reader import BinlogReader
from binlake.render.jsonl import render_jsonl
from binlake.render.sql import render_sql
from binlake.render.text import render_text
from binlake.txn import iter_transactions
from binlake.values.json_binary import JsonError, decode_json_binary, encode_json_binary
from binlake.wire import crc32
from tests.support.mutate import Seed, load_seed, mutant

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
    dec = _decoder_with_table(source="fuzz")  # rows events get a table to decode against
    try:
        list(dec.decode(event(code, body, 300), 300))
    except BinlogError as e:
        assert e.offset == 300 and e.source == "fuzz"


# ---- crasher classes, built by hand (no corpus needed) -------------------------------------------

# table 7: `d`.`t` (INT, VARCHAR(16), DECIMAL(10,2), BLOB), all nullable
TABLE_MAP_7 = (
    (7).to_bytes(6, "little")
    + b"\0\0\x01d\0\x01t\0\x04"
    + bytes([3, 15, 246, 245])
    + b"\x05"
    + b"\x10\x00\x0a\x02\x04"
    + b"\x0f"
)


def _decoder_with_table(metadata: bytes = b"", source: str = "hand") -> EventDecoder:
    dec = EventDecoder(source)
    list(dec.decode(event(15, FDE_80, 4, crc=True), 4))
    list(dec.decode(event(19, TABLE_MAP_7 + metadata, 200), 200))
    return dec


def _rows_event(code: int, bitmaps: bytes, data: bytes) -> bytes:
    return event(code, (7).to_bytes(6, "little") + b"\1\0" + b"\2\0" + b"\x04" + bitmaps + data, 300)


@pytest.mark.parametrize(
    ("code", "bitmaps", "data", "rows"),
    [
        # MySQL reads an image of no columns as no bytes (no NULL bitmap either): the image is empty
        (30, b"\x00", b"", []),  # insert, no column present, no rows
        (31, b"\x01\x00", b"\x00" + (5).to_bytes(4, "little"), [([5], [])]),  # update, empty after image
        (31, b"\x00\x01", b"\x00" + (5).to_bytes(4, "little"), [([], [5])]),  # update, empty before image
    ],
)
def test_image_of_no_columns_is_empty(code: int, bitmaps: bytes, data: bytes, rows: list[Any]) -> None:
    dec = _decoder_with_table()
    (ev,) = dec.decode(_rows_event(code, bitmaps, data), 300)
    present = [[v for v in image if v is not ABSENT] for pair in ev.body.rows for image in pair]
    assert present == [x for pair in rows for x in pair]
    assert all(len(image) == 4 for pair in ev.body.rows for image in pair)
    for render in (render_text, render_jsonl):
        list(render([ev]))


def test_rows_of_no_columns_cannot_hold_bytes() -> None:
    """Rows whose images are all empty are zero bytes long: bytes after them are malformed, not an
    endless loop of empty rows."""
    dec = _decoder_with_table()
    with pytest.raises(MalformedEventError) as err:
        list(dec.decode(_rows_event(30, b"\x00", b"\x00"), 300))
    assert (err.value.source, err.value.offset) == ("hand", 300) and "no columns" in str(err.value)


@pytest.mark.parametrize("field", [b"\x08\x01\x04", b"\x09\x02\x04\x00"])  # simple, with prefix
def test_primary_key_beyond_the_columns(field: bytes) -> None:
    """Optional metadata naming a primary-key column the table does not have is a malformed table map
    (the JSON renderer indexed the columns with it)."""
    with pytest.raises(MalformedEventError) as err:
        _decoder_with_table(field)
    assert err.value.offset == 200 and "primary key names column 4" in str(err.value)
    dec = _decoder_with_table(b"\x08\x01\x03")  # column 3 exists
    assert dec.state.table_maps[7].primary_key == [3]


def _shared_child_arrays(depth: int) -> bytes:
    """Binary JSON: ``depth`` nested arrays whose two entries both point at the same child array."""
    doc = struct.pack("<HH", 0, 4)
    for _ in range(depth):
        doc = struct.pack("<HH", 2, 10 + len(doc)) + (b"\x02" + struct.pack("<H", 10)) * 2 + doc
    return b"\x02" + doc


def test_json_entries_sharing_bytes_do_not_explode() -> None:
    """A 225-byte document that would decode to 2^22 arrays (minutes, then memory) is refused at once;
    a document with the same shape but bytes of its own still decodes."""
    with _time_limit(1.0), pytest.raises(JsonError, match="overlap"):
        decode_json_binary(_shared_child_arrays(22))
    doc = [[[[]], [[]]], [[[]], [[]]]]
    assert decode_json_binary(encode_json_binary(doc)) == doc


@pytest.mark.parametrize("text", [b"", b"\n"])
def test_statement_of_no_lines_renders(text: bytes) -> None:
    """A QUERY event with no statement text (damaged, or written so) is a DDL transaction of its own:
    every renderer copes (flashback quoted its first line)."""
    dec = EventDecoder("hand")
    list(dec.decode(event(15, FDE_80, 4, crc=True), 4))
    (ev,) = dec.decode(event(2, struct.pack("<IIBHH", 1, 0, 0, 0, 0) + b"\0" + text, 200), 200)
    assert list(render_text([ev])) and list(render_jsonl([ev]))
    for flashback in (False, True):
        assert list(render_sql(iter_transactions([(0, ev)]), flashback=flashback))


# ---- the campaign: mutants of real files through the reader and every renderer -----------------
#
# Only ``BinlogError`` may come out, always naming file and offset. A plain ValueError (or IndexError,
# struct.error, ...) is not acceptable at the boundary: body decoders raise them on bytes that break
# their layout and ``EventDecoder`` wraps them into ``MalformedEventError``; anything else escaping is
# a crasher. Renderers may refuse with their own ``BinlogError`` (``SqlError``) and nothing else.

# Real files reaching most decoder paths: compressed transactions, JSON and partial JSON, ENUM/SET,
# VECTOR, MINIMAL images, full metadata with primary keys, invisible columns, MariaDB GTIDs and
# annotations, 5.1 NDB partial rows, a pre-GA a_drop tree, 5.6/5.7 statements and rows.
SEEDS = [
    "blackbeam-rust_mysql_common/transaction_compression.000001",
    "osheroff-mysql-binlog-connector-java/mysql-bin.compressed",
    "blackbeam-rust_mysql_common/json.binlog.000001",
    "blackbeam-rust_mysql_common/mysql-enum-string-set.000001",
    "blackbeam-rust_mysql_common/vector.binlog",
    "blackbeam-rust_mysql_common/json-opaque.binlog",
    "blackbeam-rust_mysql_common/minimal_row_metadata.000001",
    "blackbeam-rust_mysql_common/mariadb-bin.000001",
    "mariadb-server-10.3/std_data/rpl/master-bin-seq_10.3.36.000001",
    "mysql-server-8.0.39/std_data/rpl_binlog_with_gipk_info_full_metadata.000001",
    "blackbeam-rust_mysql_common/binlog-invisible-columns.000001",
    "mysql-server-8.0.39/suite/binlog/std_data/update-partial-row.binlog",
    "mysql-server-8.0.39/suite/binlog/std_data/ver_5_1-wl2325_r.001",
    "zalora-binlog-parser/fixtures/mysql-bin.07",
    "go-mysql-org-go-mysql/tcb-eval002c-bin.003320",
]
CAMPAIGN_SEED = int(os.environ.get("BINLAKE_FUZZ_SEED", "13"))  # change it (or RUNS) to explore more
MUTANTS_PER_FILE = int(os.environ.get("BINLAKE_FUZZ_RUNS", "300"))
TIME_LIMIT = 2.0  # seconds one input may take through the reader and the renderers
RSS_GROWTH = 256 << 20  # how far the process's peak RSS may rise during one file's mutants
ADDRESS_CAP = 1 << 30  # more address space than this and an input gets MemoryError, not the machine

# Crashers the campaign found, replayed whatever the constants above become: (file, campaign seed,
# mutant index, what it broke before the fix).
REGRESSIONS = [
    ("blackbeam-rust_mysql_common/json-opaque.binlog", 1, 70, "IndexError in render/jsonl.py"),
    ("blackbeam-rust_mysql_common/vector.binlog", 7, 1025, "IndexError in render/jsonl.py"),
    ("blackbeam-rust_mysql_common/json-opaque.binlog", 7, 446, "IndentationError in values/plan.py"),
    ("zalora-binlog-parser/fixtures/mysql-bin.07", 7, 169, "IndentationError in values/plan.py"),
    ("mysql-server-8.0.39/suite/binlog/std_data/update-partial-row.binlog", 7, 77, "IndentationError"),
    ("blackbeam-rust_mysql_common/transaction_compression.000001", 7, 108, "IndentationError, inner event"),
]


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def _address_cap(extra: int) -> Iterator[None]:
    """Cap the address space at what is mapped now plus ``extra`` (Linux), so a bomb that slips
    through fails the test with MemoryError instead of taking the shared machine's memory."""
    statm = Path("/proc/self/statm")
    if not statm.exists():
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = int(statm.read_text().split()[0]) * resource.getpagesize() + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def through_everything(path: Path, verify_checksum: bool) -> None:
    """Read ``path`` and render what was read as text, JSON lines and redo/undo SQL."""
    events = []
    try:
        for ev in BinlogReader(path, verify_checksum=verify_checksum):
            events.append(ev)
    except BinlogError as e:
        assert e.source == str(path) and e.offset is not None, f"{type(e).__name__} lacks file/offset: {e}"
    for _ in render_text(events):
        pass
    for _ in render_jsonl(events):
        pass
    for flashback in (False, True):
        try:
            for _ in render_sql(iter_transactions((0, ev) for ev in events), flashback=flashback):
                pass
        except BinlogError:
            pass


def _crash(e: BaseException) -> str:
    frame = traceback.extract_tb(e.__traceback__)[-1]
    return f"{type(e).__name__}: {str(e)[:200]} at {Path(frame.filename).name}:{frame.lineno}"


def run_mutant(seed: Seed, base: int, index: int, tmp_path: Path) -> str | None:
    """What went wrong with one mutant (None: only typed errors, in time)."""
    data, how = mutant(seed, base, index)
    path = tmp_path / "mutant.bin"
    path.write_bytes(data)
    try:
        with _time_limit(TIME_LIMIT):
            through_everything(path, verify_checksum=index % 4 == 0)
    except (Exception, MemoryError) as e:
        return f"{seed.path.name} seed {base} #{index} ({how}): {_crash(e)}"
    return None


@pytest.mark.parametrize("name", SEEDS)
def test_mutants_of_real_files(corpus: Path, tmp_path: Path, name: str) -> None:
    seed = load_seed(corpus / name)
    assert seed.spans, f"{name}: the seed itself does not read"
    failures = []
    start = _peak_rss()
    with _address_cap(ADDRESS_CAP):
        for index in range(MUTANTS_PER_FILE):
            failure = run_mutant(seed, CAMPAIGN_SEED, index, tmp_path)
            if failure is None and _peak_rss() - start > RSS_GROWTH:
                failure = (
                    f"{name} seed {CAMPAIGN_SEED} #{index}: peak RSS grew by {_peak_rss() - start} bytes"
                )
            if failure:
                failures.append(failure)
                if len(failures) >= 10 or "RSS" in failure:
                    break
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(("name", "base", "index", "what"), REGRESSIONS)
def test_fixed_crashers(corpus: Path, tmp_path: Path, name: str, base: int, index: int, what: str) -> None:
    assert run_mutant(load_seed(corpus / name), base, index, tmp_path) is None


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
