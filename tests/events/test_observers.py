"""Decoder observers by event type (``DecodeState.observers_of``): one with ``event_kinds`` hears
those events alone, the others every event, in the order they were given, on the compiled
envelope and on the pure decoder alike; and a schema tracker routed so ends where one that hears
every event ends, over the whole real corpus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake import decoder as decoder_module
from binlake.decoder import EventDecoder
from binlake.errors import BinlogError
from binlake.events import SCHEMA_KINDS
from binlake.events.types import EventType
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.schema import SchemaHistory, SchemaTracker
from tests.conftest import corpus_index
from tests.events.test_fastenv import _frames

PICKED = frozenset({EventType.TABLE_MAP, EventType.XID})


class Picky:
    """Records what it hears, and hears only ``PICKED``."""

    event_kinds = PICKED

    def __init__(self, calls: list[tuple[str, int]], name: str = "picky") -> None:
        self.calls, self.name = calls, name

    def __call__(self, ev: Any) -> None:
        self.calls.append((self.name, ev.offset))


@pytest.fixture(params=[False, True], ids=["pure", "compiled"])
def envelope(request: pytest.FixtureRequest) -> Iterator[bool]:
    if request.param and decoder_module.ENVELOPE.built is None:
        pytest.skip("the compiled envelope is not built")
    decoder_module.ENVELOPE.choose(request.param)
    try:
        yield request.param
    finally:
        decoder_module.ENVELOPE.choose(decoder_module.ENVELOPE.built is not None)


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("observed"), target_bytes=150_000, max_file_size=None).files[0]


def test_an_observer_hears_the_kinds_it_names_and_the_rest_hear_every_event(
    series: Path, envelope: bool
) -> None:
    calls: list[tuple[str, int]] = []
    r = BinlogReader(series, observers=[lambda ev: calls.append(("every", ev.offset)), Picky(calls)])
    events = list(r)
    # (the format description is read as the reader opens, before its observers are attached)
    assert events[0].kind == EventType.FORMAT_DESCRIPTION
    expected: list[tuple[str, int]] = []
    for ev in events[1:]:
        expected.append(("every", ev.offset))
        if ev.kind in PICKED:
            expected.append(("picky", ev.offset))
    assert sum(ev.kind in PICKED for ev in events) > 50
    assert calls == expected


def test_observers_changed_while_decoding_are_heard_from_then_on(series: Path, envelope: bool) -> None:
    """Added, or put in another's place (the same count): the routes are made again. (One event
    per call: a reader decodes a transaction ahead of what it has handed out.)"""
    data = series.read_bytes()
    dec = EventDecoder(str(series))
    calls: list[tuple[str, int]] = []
    dec.state.observers.append(Picky(calls, "first"))
    frames = _frames(data)
    thirds = [
        frames[: len(frames) // 3],
        frames[len(frames) // 3 : 2 * len(frames) // 3],
        frames[2 * len(frames) // 3 :],
    ]
    decoded: list[list[Any]] = []
    for i, part in enumerate(thirds):
        if i == 1:
            dec.state.observers.append(Picky(calls, "added"))
        if i == 2:
            dec.state.observers[0] = Picky(calls, "swapped")
        decoded.append([ev for pos, size in part for ev in dec.decode(data[pos : pos + size], pos)])

    def heard(evs: list[Any], *names: str) -> list[tuple[str, int]]:
        return [(name, ev.offset) for ev in evs if ev.kind in PICKED for name in names]

    head, middle, tail = decoded
    assert calls == heard(head, "first") + heard(middle, "first", "added") + heard(tail, "swapped", "added")
    assert heard(head, "first") and heard(tail, "swapped")


def test_a_routed_tracker_ends_where_one_hearing_every_event_ends(corpus: Path) -> None:
    """Every real binlog: the tracker given statements and table maps alone (``event_kinds``)
    replays the same DDL, names the same maps and reports the same mismatches as one given
    every event (a lambda around it: no ``event_kinds``), and each event reads the same."""
    compared = named = 0
    for rec in corpus_index()["records"]:
        outcomes = []
        for routed in (True, False):
            tracker = SchemaTracker(SchemaHistory(), on_mismatch="positional")
            observer = tracker if routed else (lambda ev, t=tracker: t(ev))
            seen: list[Any] = []
            try:
                for ev in BinlogReader(
                    corpus / rec["path"], observers=[observer], verify_checksum=False, require_fde=False
                ):
                    seen.append((ev.offset, ev.kind, getattr(ev.body, "columns", None)))
            except BinlogError as e:
                seen.append(str(e))
            outcomes.append(
                (seen, tracker.history.catalog, tracker.completed, tracker.mismatches, tracker.generation)
            )
        assert outcomes[0] == outcomes[1], rec["path"]
        compared += 1
        named += outcomes[0][2]
    assert compared > 100 and named > 0, (compared, named)


def test_a_tracker_hears_every_kind_a_statement_or_table_map_comes_in() -> None:
    """``SCHEMA_KINDS`` is found from the body decoders' table: every kind decoded as a Query."""
    from binlake.events import BODY_DECODERS, query, table_map

    statements = {c for c, d in BODY_DECODERS.items() if d is query.decode_query}
    assert {EventType.QUERY, EventType.MARIA_QUERY_COMPRESSED, EventType.EXECUTE_LOAD_QUERY} <= statements
    assert SCHEMA_KINDS == statements | {
        c for c, d in BODY_DECODERS.items() if d is table_map.decode_table_map
    }
    assert SchemaTracker.event_kinds == SCHEMA_KINDS
