"""The reader's runs (``_fastenv.next_events``): a plain transaction's events decoded in one call
give what one call per event gives — the same events, the same observer calls (once each, in
order, none past a stop position), the same error after the same events, and the reader's
``position`` at the damaged event — and on an intact series most events come that way."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from binlake import reader as reader_module
from binlake.errors import BinlogError, ChecksumMismatchError
from binlake.events.types import ROWS_EVENT_KINDS, EventType
from binlake.generate import generate
from binlake.reader import BinlogReader, _Buffered
from tests.events.test_fastenv import _frames, deep

_fastenv = pytest.importorskip(
    "binlake.events._fastenv",
    reason="the compiled envelope is not built (no C compiler or Cython at install: pure only)",
)


def _series(tmp_path: Path, flavor: str = "mysql80", size: int = 200_000) -> Path:
    return generate(tmp_path, flavor=flavor, target_bytes=size, max_file_size=None).files[0]


def _read(path: Path, runs: bool, monkeypatch: pytest.MonkeyPatch, **options: Any) -> dict[str, Any]:
    """Every event (deep), each observer call's offset, the error and ``position`` after it."""
    with monkeypatch.context() as m:
        if not runs:  # one call per event, as before runs
            m.setattr(_Buffered, "run", lambda self, pos, stop: ([], pos, None))
        observed: list[int] = []
        r = BinlogReader(path, observers=[lambda ev: observed.append(ev.offset)], **options)
        got: list[Any] = []
        kinds: list[tuple[int, int]] = []
        error = None
        try:
            for ev in r:
                got.append(deep(ev))
                kinds.append((ev.offset, ev.kind))
        except BinlogError as e:
            error = (type(e).__name__, e.offset, str(e))
        return {"events": got, "kinds": kinds, "observed": observed, "error": error, "position": r.position}


def _same(path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> dict[str, Any]:
    a, b = (_read(path, runs, monkeypatch, **options) for runs in (False, True))
    assert a["error"] == b["error"]
    assert a["observed"] == b["observed"]
    assert a["position"] == b["position"]
    assert len(a["events"]) == len(b["events"])
    for i, (x, y) in enumerate(zip(a["events"], b["events"], strict=True)):
        assert x == y, f"event {i} differs"
    return b


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb", "mysql57"])
def test_runs_read_what_single_events_read(
    tmp_path: Path, flavor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _series(tmp_path, flavor)
    for options in ({}, {"decode_rows": False}):
        got = _same(path, monkeypatch, **options)
        assert got["error"] is None and len(got["events"]) > 1000
        # every event observed once, in order (the format event is read before observers are asked)
        assert got["observed"] == [o for o, k in got["kinds"] if k != EventType.FORMAT_DESCRIPTION]


def test_most_events_come_in_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a path nothing takes: on an intact series nearly every event is read in a run."""
    path = _series(tmp_path)
    in_runs = 0
    real = _Buffered.run

    def counted(self: _Buffered, pos: int, stop: int | None) -> Any:
        nonlocal in_runs
        got = real(self, pos, stop)
        in_runs += len(got[0])
        return got

    monkeypatch.setattr(_Buffered, "run", counted)
    total = sum(1 for _ in BinlogReader(path, decode_rows=False))
    assert total > 1000 and in_runs > 0.9 * total, (in_runs, total)


def test_stop_positions_inside_transactions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stop at every event start of a few transactions: nothing at or past it read, nor observed."""
    path = _series(tmp_path, size=60_000)
    starts = [pos for pos, _ in _frames(path.read_bytes())]
    for stop in starts[3:40]:
        got = _same(path, monkeypatch, stop_position=stop)
        assert got["observed"] and max(got["observed"]) < stop


def _damage_inside_transactions(path: Path, out: Path) -> list[int]:
    """Copies of ``path`` with the body of the 2nd..5th rows event after a BEGIN changed (a stale
    checksum), one per copy; the damaged events' offsets."""
    data = path.read_bytes()
    frames = _frames(data)
    rows = [pos for pos, _ in frames if data[pos + 4] in ROWS_EVENT_KINDS][1:5]
    for i, pos in enumerate(rows):
        bad = bytearray(data)
        bad[pos + 25] ^= 0xFF
        (out / f"bad{i}.000001").write_bytes(bytes(bad))
    return rows


def test_a_damaged_event_inside_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The events of its transaction before it come first, then the same error at its offset; the
    reader's position is the damaged event's start."""
    path = _series(tmp_path, size=60_000)
    for i, pos in enumerate(_damage_inside_transactions(path, tmp_path)):
        got = _same(tmp_path / f"bad{i}.000001", monkeypatch, decode_rows=False)
        assert got["error"] is not None and got["error"][0] == ChecksumMismatchError.__name__
        assert got["error"][1] == pos and got["position"] == pos
        # the transaction's GTID, BEGIN and table map were given before the error
        assert got["kinds"][-1][1] == EventType.TABLE_MAP or got["kinds"][-1][1] in ROWS_EVENT_KINDS


def test_an_observer_that_raises_is_called_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An observer's error inside a run is raised after the events before it, and that event is
    not decoded (or observed) a second time."""
    path = _series(tmp_path, size=60_000)
    data = path.read_bytes()
    target = [pos for pos, _ in _frames(data) if data[pos + 4] == EventType.TABLE_MAP][3]
    outcomes = []
    for runs in (False, True):
        calls: list[int] = []

        def observe(ev: Any, calls: list[int] = calls) -> None:
            calls.append(ev.offset)
            if ev.offset == target:
                raise RuntimeError("observer refuses")

        with monkeypatch.context() as m:
            if not runs:
                m.setattr(_Buffered, "run", lambda self, pos, stop: ([], pos, None))
            r = BinlogReader(path, observers=[observe])
            seen = []
            with pytest.raises(RuntimeError, match="observer refuses"):
                for ev in r:
                    seen.append(ev.offset)
        assert calls.count(target) == 1
        outcomes.append((seen, calls, r.position))
    assert outcomes[0] == outcomes[1]


def test_runs_stop_at_a_checksum_footer_of_their_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rows event whose body was changed and its checksum made again reads as the pure path
    reads it (a value or the body decoder's error), the events before it first."""
    path = _series(tmp_path, size=60_000)
    data = bytearray(path.read_bytes())
    pos, size = next((p, s) for p, s in _frames(bytes(data)) if data[p + 4] in ROWS_EVENT_KINDS)
    data[pos + 19 : pos + 25] = b"\xff" * 6  # the table id: no such map
    struct.pack_into("<I", data, pos + size - 4, zlib.crc32(bytes(data[pos : pos + size - 4])))
    bad = tmp_path / "map.000001"
    bad.write_bytes(bytes(data))
    _same(bad, monkeypatch)
    _same(bad, monkeypatch, decode_rows=False)


def test_buffer_edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A buffer that ends inside every few events (a small FAST_CHUNK): runs end there and the
    next read goes on, the same events."""
    path = _series(tmp_path, size=80_000)
    for chunk in (97, 1000, 4096):
        monkeypatch.setattr(reader_module, "FAST_CHUNK", chunk)
        _same(path, monkeypatch, decode_rows=False)


def test_position_while_an_event_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``position`` while the consumer holds an event is that event's start, as with one call per
    event: a consumer that stops at an event inside a transaction and resumes at ``position``
    reads that event again, and none of the transaction's events it had already used."""
    path = _series(tmp_path, size=60_000)
    for runs in (False, True):
        with monkeypatch.context() as m:
            if not runs:
                m.setattr(_Buffered, "run", lambda self, pos, stop: ([], pos, None))
            r = BinlogReader(path, decode_rows=False)
            seen = [(ev.offset, r.position) for ev in r]
            assert [p for _, p in seen] == [o for o, _ in seen], f"runs={runs}"
            # stop at the third rows event (inside a run when runs are on), resume at ``position``
            target = [o for o, _ in seen if path.read_bytes()[o + 4] in ROWS_EVENT_KINDS][2]
            r = BinlogReader(path, decode_rows=False)
            for ev in r:
                if ev.offset == target:
                    break
            resumed = BinlogReader(path, decode_rows=False, start_position=r.position)
            after = [ev.offset for ev in resumed][1:]  # (the format event comes first)
            assert after[0] == target, f"runs={runs}"


@pytest.mark.parametrize("ceiling", [1 << 64, 99_999_999_999_999_999_999])
def test_a_ceiling_past_any_c_integer(tmp_path: Path, ceiling: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A payload ceiling too large for a C integer (``BINLAKE_MAX_PAYLOAD`` written as "no limit")
    reads as the default does, with runs (the compiled call takes the ceiling as a C integer) and
    where events are omitted (``_fastenv.hop`` takes it too)."""
    path = _series(tmp_path, size=20_000)
    want = [deep(ev) for ev in BinlogReader(path)]
    assert _same(path, monkeypatch, max_payload=ceiling)["events"] == want
    monkeypatch.setenv("BINLAKE_MAX_PAYLOAD", str(ceiling))
    assert [deep(ev) for ev in BinlogReader(path)] == want
    omitting = {"skip": frozenset({EventType.XID}), "omit_skipped": True}
    assert len(list(BinlogReader(path, **omitting))) == len(
        list(BinlogReader(path, max_payload=1 << 30, **omitting))
    )
