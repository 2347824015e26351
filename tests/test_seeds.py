"""The real server bytes quoted in the seed documents, decoded to what the documents say they are."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from binlake.decoder import EventDecoder
from binlake.events.control import Rotate, Stop, Xid
from binlake.events.gtid import PreviousGtids
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.reader import BinlogReader
from binlake.render.text import rows_lines

SEEDS = Path(__file__).resolve().parents[1].parent / "shared" / "seeds"


def seed(prefix: str) -> str:
    files = sorted(SEEDS.glob(prefix + "_*.txt"))
    if not files:
        pytest.skip(f"seed documents not found in {SEEDS}")
    return files[0].read_text(encoding="utf-8").replace("\u00a0", " ")


def hexdump_bytes(text: str, nth: int) -> dict[int, int]:
    """Bytes of the ``nth`` ``hexdump -C`` listing in a document: {file offset: byte}."""
    out: dict[int, int] = {}
    starts = [m.end() for m in re.finditer(r"hexdump -C[^\n]*\n", text)]
    lines = text[starts[nth] :].splitlines()
    for line in lines:
        m = re.match(r"^([0-9a-f]{8})  ((?:[0-9a-f]{2} {1,2})+)", line)
        if m:
            off = int(m.group(1), 16)
            for i, h in enumerate(m.group(2).split()):
                out[off + i] = int(h, 16)
        elif re.match(r"^[0-9a-f]{8}\s*$", line) or line.startswith("["):
            break
    return out


def assemble(*parts: dict[int, int]) -> bytes:
    merged: dict[int, int] = {}
    for p in parts:
        merged.update(p)
    return bytes(merged[i] for i in range(max(merged) + 1))


def test_seed_001_format_description_and_stop(tmp_path: Path) -> None:
    text = seed("001")
    fde_file = hexdump_bytes(text, 0)
    stop = hexdump_bytes(text, 1)
    f = tmp_path / "mysql-bin.000002"
    f.write_bytes(assemble(fde_file, stop))
    events = list(BinlogReader(f))
    fde = events[0].body
    assert fde.server_version == "5.6.37-log" and fde.binlog_version == 4 and fde.header_length == 19
    assert fde.checksum_alg == 1 and len(fde.post_header_lengths) == 35
    assert isinstance(events[1].body, Stop) and events[1].offset == 120 and events[1].end_offset == 143


def test_seed_001_query_xid_and_rotate(tmp_path: Path) -> None:
    text = seed("001")
    fde_only = {k: v for k, v in hexdump_bytes(text, 0).items() if k < 120}
    body = hexdump_bytes(text, 2)
    f = tmp_path / "mysql-bin.000001"
    f.write_bytes(assemble(fde_only, body))
    evs = list(BinlogReader(f))[1:]
    assert [type(e.body) for e in evs] == [Query, Query, Xid]
    assert evs[0].body.query == "BEGIN"
    assert evs[1].body.query == "insert into tttt2 select 'AAAA'" and evs[1].body.database == "test"
    assert evs[2].body.xid == 40 and evs[2].end_offset == 335
    rotate = assemble(fde_only, hexdump_bytes(text, 4))
    f.write_bytes(rotate)
    rot = list(BinlogReader(f))[1].body
    assert isinstance(rot, Rotate) and rot.next_file == "mysql-bin.000002" and rot.position == 4


def test_seed_003_previous_gtids() -> None:
    text = seed("003")
    block = text[text.index("# Position  Timestamp") :].splitlines()[1:14]
    # each line: '#', the offset column, then the bytes (and an ASCII column after '|')
    raw = bytes(int(h, 16) for line in block for h in line[1:].split("|")[0].split()[1:])
    dec = EventDecoder("seed003")
    ev = next(dec.decode(raw, 120))
    assert isinstance(ev.body, PreviousGtids)
    assert str(ev.body).split(",\n") == [
        "7e23401a-c603-11e3-8e13-5e10e6a05cfb:1-5",
        "8186fc1e-c5ff-11e3-8df9-e66ccf50db66:1-11",
        "a6ce328c-c602-11e3-8e0d-e66ccf50db66:1-6",
        "b7009920-c601-11e3-8e07-5e10e6a05cfb:1-6",
    ]
    assert ev.checksum == 0x311EC069


def _binlog_blocks(text: str) -> list[tuple[bytes, list[str]]]:
    """(events from a ``BINLOG '…'`` statement, the ``###`` lines mysqlbinlog printed after it)."""
    out = []
    for m in re.finditer(r"BINLOG '\n(.*?)\n'/\*!\*/;\n((?:###[^\n]*\n)+)", text, re.S):
        # mysqlbinlog encodes each event on its own: split the text after each run of '=' padding
        chunks = re.split(r"(?<==)(?=[^=])", "".join(m.group(1).split()))
        raw = b"".join(base64.b64decode(c) for c in chunks)
        out.append((raw, m.group(2).rstrip("\n").split("\n")))
    return out


def _decode_concatenated(raw: bytes) -> list:
    dec = EventDecoder("seed")
    events, pos = [], 0
    while pos < len(raw):
        size = int.from_bytes(raw[pos + 9 : pos + 13], "little")
        events.extend(dec.decode(raw[pos : pos + size], pos))
        pos += size
    return events


def test_seed_000_rows_match_mysqlbinlog() -> None:
    blocks = _binlog_blocks(seed("000"))
    assert len(blocks) >= 2
    for raw, expected in blocks:
        events = _decode_concatenated(raw)
        lines = [
            line
            for e in events
            if isinstance(e.body, Rows)
            for line in rows_lines(e.body, 2, positional=True)
        ]
        assert [" ".join(x.split()) for x in lines] == [" ".join(x.split()) for x in expected]


def test_seed_004_table_map_and_update_rows() -> None:
    text = seed("004")
    b64 = re.findall(r"EVENT TYPE: \w+\n([A-Za-z0-9+/=]+)", text)
    raw = b"".join(base64.b64decode(x) for x in b64[:2])
    events = _decode_concatenated(raw)
    tm, upd = events[0].body, events[1].body
    assert (tm.database, tm.table, tm.table_id) == ("test", "test", 455)
    import datetime as dt

    assert upd.rows == [
        ([2, "Jerry", "Hollywood", dt.date(1940, 2, 10)], [2, "Jerry", "Hollywood", dt.date(1940, 2, 11)])
    ]
