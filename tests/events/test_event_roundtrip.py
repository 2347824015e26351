"""decode(encode(x)) == x for every event family, property-tested through the writer and reader."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.events.control import Incident, Intvar, Rand, Rotate, RowsQuery, UserVar, XaPrepare, Xid
from binlake.events.gtid import Gtid, MariaGtid, PreviousGtids
from binlake.events.payload import compress_payload
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.events.vendor import PolarxGcn, PolarxSequence
from binlake.reader import BinlogReader
from binlake.values.columns import ColumnDef
from binlake.values.types import ColumnType
from binlake.writer import BinlogWriter

u8, u16, u32, u64 = (st.integers(0, 2**n - 1) for n in (8, 16, 32, 64))
text = st.text(max_size=40)
uuids = st.uuids().map(str)

queries = st.builds(
    Query,
    u32,
    u32,
    u16,
    text,
    text,
    st.fixed_dictionaries(
        {},
        optional={
            "flags2": u32,
            "sql_mode": u64,
            "catalog_nz": st.text(max_size=10),
            "auto_increment": st.fixed_dictionaries({"increment": u16, "offset": u16}),
            "time_zone": st.text(max_size=10),
            "microseconds": st.integers(0, 999999),
            "updated_db_names": st.lists(st.text(alphabet="abcdef", max_size=8), max_size=3),
        },
    ),
)
gtids = st.builds(
    lambda f, sid, gno, lc, sn, ts, ts2, tl, v1, v2: Gtid(
        f, sid, gno, False, None, lc, lc + sn, ts, ts2 if ts2 else ts, tl, v1, v2 if v2 else v1
    ),
    u8,
    uuids,
    st.integers(1, 2**62),
    st.integers(0, 2**40),
    st.integers(1, 2**20),
    st.integers(0, 2**55 - 1),
    st.one_of(st.none(), st.integers(0, 2**55 - 1)),
    st.integers(0, 2**40),
    st.integers(0, 2**31 - 1),
    st.one_of(st.none(), st.integers(0, 2**31 - 1)),
)
previous = st.dictionaries(
    st.tuples(uuids, st.just("")),
    st.lists(
        st.tuples(st.integers(1, 1000), st.integers(0, 1000)).map(lambda t: (t[0], t[0] + t[1])),
        min_size=1,
        max_size=3,
    ),
    max_size=3,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    q=queries,
    g=gtids,
    xid=u64,
    rot=text,
    iv=st.tuples(st.integers(0, 2), u64),
    rnd=st.tuples(u64, u64),
    uv=st.builds(
        UserVar,
        text,
        st.just(False),
        st.integers(0, 4),
        u32,
        st.binary(max_size=20),
        st.one_of(st.none(), st.integers(0, 1)),
    ),
    inc=st.builds(Incident, u16, st.text(max_size=30)),
    rq=st.builds(RowsQuery, st.text(max_size=50)),
    xa=st.builds(XaPrepare, st.booleans(), u32, st.binary(max_size=64), st.binary(max_size=64)),
    prev=previous,
    seq=st.builds(PolarxSequence, st.integers(0, 3), u64),
    gcn=st.builds(PolarxGcn, u8, u64),
    ints=st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.one_of(st.none(), st.text(max_size=30))),
        min_size=1,
        max_size=20,
    ),
)
def test_events_roundtrip(q, g, xid, rot, iv, rnd, uv, inc, rq, xa, prev, seq, gcn, ints) -> None:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as d:
        w = BinlogWriter(d, flavor="mysql80")
        cols = [
            ColumnDef(0, ColumnType.LONG, 0, True, name="a", unsigned=False),
            ColumnDef(1, ColumnType.VARCHAR, 400, True, name="b", collation=255),
        ]
        tm = TableMap(7, 1, "db", "t", cols, primary_key=[0], has_optional_metadata=True)
        rows = Rows("insert", 2, 7, 1, 2, 0, 3, table=tm)
        rows.rows = [(None, [a, b]) for a, b in ints]
        inner = BinlogWriter(Path(d) / "inner", flavor="mysql80")
        payload_events = [inner.encode(EventType.QUERY, q)]
        written = [
            (EventType.PREVIOUS_GTIDS, PreviousGtids(prev)),
            (EventType.GTID, g),
            (EventType.QUERY, q),
            (EventType.INTVAR, Intvar(*iv)),
            (EventType.RAND, Rand(*rnd)),
            (EventType.USER_VAR, uv),
            (EventType.TABLE_MAP, tm),
            (EventType.WRITE_ROWS_V2, rows),
            (EventType.ROWS_QUERY, rq),
            (EventType.XA_PREPARE, xa),
            (EventType.XID, Xid(xid)),
            (EventType.INCIDENT, inc),
            (EventType.POLARDBX_SEQUENCE, seq),
            (EventType.POLARDBX_GCN, gcn),
            (EventType.ROTATE, Rotate(4, rot)),
        ]
        for code, body in written:
            w.event(code, body, 1_700_000_000)
        from binlake.events.base import HEADER_V4

        raw_inner = b"".join(
            HEADER_V4.pack(0, EventType.QUERY, 1, 19 + len(x), 0, 0) + x for x in payload_events
        )
        w.event(EventType.TRANSACTION_PAYLOAD, compress_payload(raw_inner), 1_700_000_000)
        files = w.close()
        inner.close()
        read = [
            e
            for e in BinlogReader(files[0])
            if e.type_code not in (EventType.FORMAT_DESCRIPTION, EventType.STOP)
        ]
        outer = [e for e in read if e.inner_index is None][1:]  # after the writer's own PREVIOUS_GTIDS
        assert [e.type_code for e in outer[: len(written)]] == [c for c, _ in written]
        for (code, body), ev in zip(written, outer, strict=False):
            if code == EventType.WRITE_ROWS_V2:
                assert ev.body.rows == rows.rows
            elif code == EventType.TABLE_MAP:
                assert [(c.name, c.type_code, c.meta, c.unsigned, c.collation) for c in ev.body.columns] == [
                    (c.name, c.type_code, c.meta, c.unsigned, c.collation) for c in cols
                ]
            elif code == EventType.ROWS_QUERY:
                assert ev.body.query == body.query
            else:
                assert ev.body == body, code
        inner_q = [e for e in read if e.inner_index is not None]
        assert [e.body for e in inner_q] == [q]

    mg = MariaGtid(5, 1, 1, 4 | 2, commit_id=9)
    with tempfile.TemporaryDirectory() as d:
        w = BinlogWriter(d, flavor="mariadb")
        w.event(EventType.MARIA_GTID, mg, 0)
        got = [e.body for e in BinlogReader(w.close()[0]) if e.type_code == EventType.MARIA_GTID]
        assert got == [mg]
