"""The generated row decoders give exactly what the per-column decoders give, on every real binlog."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.errors import BinlogError
from binlake.events.rows import ABSENT, Rows, decode_image
from binlake.reader import BinlogReader
from binlake.values.plan import PLANS
from binlake.wire import bits_set
from tests.conftest import corpus_index

RECORDS = [
    r
    for r in corpus_index()["records"]
    if any(k.split(":")[0] in {"23", "24", "25", "30", "31", "32", "40"} for k in r.get("hist", {}))
]


def generic_rows(ev: Rows) -> list:
    tm, buf = ev.table, ev.raw_rows
    assert tm is not None and buf is not None
    before = bits_set(ev.columns_before, ev.column_count)
    after = bits_set(ev.columns_after, ev.column_count)
    out, pos = [], 0
    while pos < len(buf):
        b = a = None
        if ev.operation != "insert":
            b, pos = decode_image(buf, pos, before, tm)
        if ev.operation != "delete":
            a, pos = decode_image(buf, pos, after, tm)
        out.append((b, a))
    return out


@pytest.mark.parametrize("rec", RECORDS, ids=[r["path"] for r in RECORDS])
def test_generated_equals_per_column(corpus: Path, rec: dict) -> None:
    checked = 0
    try:
        for ev in BinlogReader(corpus / rec["path"], decode_rows=False, verify_checksum=False):
            body = ev.body
            if (
                not isinstance(body, Rows)
                or body.table is None
                or body.partial
                or body.version == 0
                or body.table.undecodable
            ):
                continue
            before = (
                tuple(bits_set(body.columns_before, body.column_count))
                if body.operation != "insert"
                else None
            )
            after = (
                tuple(bits_set(body.columns_after, body.column_count)) if body.operation != "delete" else None
            )
            fast, end = PLANS.get(body.table.signature, body.table.columns, before, after, ABSENT)(
                body.raw_rows, 0, len(body.raw_rows)
            )
            assert end == len(body.raw_rows)
            assert fast == generic_rows(body)
            checked += 1
    except BinlogError:
        pass  # damaged files: what came before the damage was compared
    assert checked > 0 or rec.get("problems") or rec.get("encrypted_from")
