"""Skipped event types: a reader that omits them yields exactly the other events of one that
reports them (``Skipped``), and stops with the same error, on every corpus file that starts with a
format event (damaged and encrypted ones too), compiled (hopped over in C) and pure, whole and from
a start to a stop position."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake import native
from binlake.errors import BinlogError
from binlake.events.base import Skipped
from binlake.events.types import ROWS_EVENT_KINDS, EventType
from binlake.reader import BinlogReader
from tests.conftest import corpus_index

SKIP = frozenset(
    {EventType.GTID, EventType.ANONYMOUS_GTID, EventType.XID, EventType.MARIA_GTID, *ROWS_EVENT_KINDS}
)
RECORDS = [
    r
    for r in corpus_index()["records"]
    if r.get("events")
    and not r.get("problems")
    and not r.get("crc_bad_events")
    and r.get("first_event_type") == EventType.FORMAT_DESCRIPTION
]


def seen(path: Path, omit: bool, start: int | None = None, stop: int | None = None) -> list[tuple[Any, ...]]:
    """What a reader yields, then the error it stops with (a damaged or encrypted file)."""
    reader = BinlogReader(path, skip=SKIP, omit_skipped=omit, start_position=start, stop_position=stop)
    out: list[tuple[Any, ...]] = []
    try:
        for e in reader:
            out.append((e.offset, e.type_code, None if type(e.body) is Skipped else repr(e.body)))
    except BinlogError as e:
        out.append((type(e).__name__, e.offset, str(e)))
    return out


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "pure"])
@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r["path"])
def test_omitted_events_are_exactly_the_skipped_ones(
    corpus: Path, record: dict[str, Any], compiled: bool
) -> None:
    path = corpus / record["path"]
    native.use_compiled(compiled)
    try:
        told = seen(path, omit=False)
        kept = [e for e in told if e[2] is not None]
        assert seen(path, omit=True) == kept
        events = [e for e in told if type(e[0]) is int]  # (not the error a damaged file ends with)
        if len(events) > 4:  # from an event start to another: the same window of them
            start, stop = events[2][0], events[-2][0]
            window = [e for e in kept if type(e[0]) is int and start <= e[0] < stop]
            assert seen(path, omit=True, start=start, stop=stop) == [kept[0], *window]
    finally:
        native.use_compiled(not native.PURE_FORCED)
