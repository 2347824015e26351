"""Event families the corpus shows rarely or only in streams: checked on real files where they exist
and on bytes laid out as the servers document them where they do not."""

from __future__ import annotations

import struct
from pathlib import Path

from binlake.decoder import EventDecoder
from binlake.events.base import HEADER_V4
from binlake.events.control import Heartbeat, XaPrepare
from binlake.events.gtid import MariaGtid
from binlake.events.vendor import PolarxSequence
from binlake.reader import BinlogReader


def _event(code: int, body: bytes, log_pos: int = 0) -> bytes:
    return HEADER_V4.pack(0, code, 1, 19 + len(body), log_pos, 0) + body


def test_heartbeat_v1_and_v2() -> None:
    dec = EventDecoder("stream")
    hb = next(dec.decode(_event(27, b"mysql-bin.000007", 1234), 0)).body
    assert hb == Heartbeat("mysql-bin.000007", 1234)
    # v2: (type, length, value) fields: 1 = file name, 2 = position as a packed integer, 0 = end
    body = b"\x01\x10mysql-bin.000008" + b"\x02\x03\xfc\x10\x27" + b"\x00"
    hb2 = next(dec.decode(_event(41, body), 0)).body
    assert hb2 == Heartbeat("mysql-bin.000008", 10000)


def test_mariadb_gtid_with_xa() -> None:
    dec = EventDecoder("stream")
    body = struct.pack("<QIB", 77, 3, 64) + struct.pack("<I", 1) + b"\x02\x01" + b"gtb"
    ev = next(dec.decode(_event(162, body), 0)).body
    assert isinstance(ev, MariaGtid)
    assert (ev.gtid, ev.xa_format_id, ev.xa_gtrid, ev.xa_bqual) == ("3-1-77", 1, b"gt", b"b")


def test_polardbx_xa_and_sequences(corpus: Path) -> None:
    events = []
    try:
        for ev in BinlogReader(corpus / "polardb-polardbx-cdc/polardbx-cdc-task/mysql_bin.1"):
            events.append(ev)
    except Exception as e:  # the file's last byte is a stray: an incomplete tail
        assert type(e).__name__ == "IncompleteTailError"
    seqs = [e.body for e in events if isinstance(e.body, PolarxSequence)]
    assert [(s.sequence_type, s.sequence) for s in seqs] == [
        (1, 7234839877466980416),
        (2, 7234839881111830594),
    ]
    xa = next(e.body for e in events if isinstance(e.body, XaPrepare))
    assert xa.format_id == 1 and xa.gtrid == b"drds-1881c1536f401000@9d11c57d194702f4"
    assert xa.bqual == b"D1_P00000_GROUP@0000" and xa.one_phase  # the byte AliSQL wrote is 1
    queries = [e.body.query for e in events if e.type_name == "QUERY"]
    assert queries[0].startswith("XA START") and queries[1].startswith("XA END")


def test_binlog_v3_start_event(corpus: Path) -> None:
    events = list(
        BinlogReader(corpus / "mysql-server-5.5.30/suite/binlog/std_data/binlog_old_version_4_1.000001")
    )
    start = events[0].body
    assert (start.binlog_version, start.server_version) == (3, "4.1.24-debug-log")
    assert [e.type_name for e in events[1:3]] == ["QUERY", "QUERY"]
    assert "CREATE_FILE" in [e.type_name for e in events]


def test_a_drop_tree_event_numbering(corpus: Path) -> None:
    """5.2.2-a_drop6p13 numbered TABLE_MAP 16 and the pre-GA rows events 17-19: we read them under
    today's numbers (and keep the v0 rows raw, with the reason)."""
    events = list(BinlogReader(corpus / "mysql-server-8.0.39/suite/binlog/std_data/ver_5_1-wl2325_r.001"))
    by_raw = {e.header.type_code: e.type_name for e in events}
    assert by_raw[16] == "TABLE_MAP"
    assert [by_raw[17], by_raw[18], by_raw[19]] == [
        "PRE_GA_WRITE_ROWS",
        "PRE_GA_UPDATE_ROWS",
        "PRE_GA_DELETE_ROWS",
    ]
    tm = next(e.body for e in events if e.header.type_code == 16)
    assert (tm.database, tm.table, len(tm.columns)) == ("test", "t1", 2)
    rows = [e.body for e in events if e.header.type_code in (17, 18, 19)]
    assert all(r.raw_rows and r.undecoded_reason for r in rows)
