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


def test_known_events_are_dropped_alike_when_the_compiled_path_hands_one_back(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``known`` (each BEGIN, a TABLE_MAP met before), a TABLE_MAP the compiled decoder hands
    back to the reader's own path (it does for layouts it leaves to the reference) is still read
    once: the same events as the pure path."""
    from types import SimpleNamespace

    from binlake import decoder as decoder_module
    from binlake.reader import KnownEvents

    records = [r for r in RECORDS if r["hist"].get("19:TABLE_MAP", 0) > 2 and r["hist"].get("2:QUERY", 0) > 2]
    assert records, "the corpus has files with table maps and queries"
    path = corpus / records[0]["path"]

    def read() -> list[tuple[Any, ...]]:
        reader = BinlogReader(path, skip=SKIP, omit_skipped=True, known=KnownEvents())
        return [(e.offset, e.type_code, repr(e.body)) for e in reader]

    native.use_compiled(False)
    try:
        want = read()
    finally:
        native.use_compiled(not native.PURE_FORCED)
    real = decoder_module.ENVELOPE.module
    assert real is not None, "the compiled envelope is built (./dev setup)"

    def next_event(decoder: Any, buf: bytes, i: int, offset: int) -> Any:
        if len(buf) - i > 4 and buf[i + 4] == EventType.TABLE_MAP:
            return None  # left to the reference decoder
        return real.next_event(decoder, buf, i, offset)

    monkeypatch.setattr(
        decoder_module.ENVELOPE,
        "module",
        SimpleNamespace(next_event=next_event, hop=real.hop, walk=real.walk),
    )
    got = read()
    assert any(t == EventType.TABLE_MAP for _, t, _ in want)
    assert got == want
