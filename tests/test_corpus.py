"""Every real binlog in ../shared/binlogs decodes: event counts and type histograms equal the
index's header walk, and damaged, encrypted or format-less files end in the right typed error after
every intact event before the damage."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path
from typing import Any

import pytest

from binlake.errors import (
    BinlogError,
    ChecksumMismatchError,
    EncryptedBinlogError,
    IncompleteTailError,
    MalformedEventError,
    NoFormatDescriptionError,
)
from binlake.events.base import UnknownEvent
from binlake.reader import BinlogReader
from binlake.render.jsonl import event_dict
from tests.conftest import corpus_index

# Files whose bytes were damaged on purpose upstream, beyond what index.json's walk can see.
KNOWN_DAMAGED = {
    # mysql-test's Bug#31793 fixture: a QUERY event overwritten in the middle of a relay log
    "mysql-server-8.0.39/std_data/corrupt-relay-bin.000624": (MalformedEventError, 91204),
}

RECORDS = corpus_index()["records"]


def expected_outcome(rec: dict[str, Any]) -> tuple[type[BinlogError] | None, int | None]:
    """The error (and its offset) a strict read must end with, from the index's own findings."""
    if rec["path"] in KNOWN_DAMAGED:
        return KNOWN_DAMAGED[rec["path"]]
    if rec.get("error", "").startswith("no magic: b'\\xfdbin"):
        return EncryptedBinlogError, 0
    if rec.get("encrypted_from"):
        return EncryptedBinlogError, rec["encrypted_from"]
    for problem in rec.get("problems") or []:
        m = re.match(r"(?:trailing \d+ bytes|bad/truncated event) at (\d+)", problem)
        if m:
            return IncompleteTailError, int(m.group(1))
    if rec.get("fde") is None and rec.get("events"):
        return NoFormatDescriptionError, 4
    if rec.get("crc_bad_events"):
        return ChecksumMismatchError, None
    return None, None


def walk(path: Path, **options: Any) -> tuple[collections.Counter[str], list[Any], BinlogError | None]:
    hist: collections.Counter[str] = collections.Counter()
    events = []
    try:
        for ev in BinlogReader(path, **options):
            if ev.inner_index is None:
                hist[str(ev.header.type_code)] += 1
            events.append(ev)
    except BinlogError as e:
        return hist, events, e
    return hist, events, None


def index_hist(rec: dict[str, Any]) -> dict[str, int]:
    return {k.split(":")[0]: v for k, v in (rec.get("hist") or {}).items() if not k.startswith("encrypted")}


@pytest.mark.parametrize("rec", RECORDS, ids=[r["path"] for r in RECORDS])
def test_file_decodes_like_the_index(corpus: Path, rec: dict[str, Any]) -> None:
    path = corpus / rec["path"]
    error, offset = expected_outcome(rec)
    hist, events, err = walk(path)
    if error is None:
        assert err is None, f"unexpected {err!r}"
        assert dict(hist) == index_hist(rec)
        assert sum(hist.values()) == rec["events"]
    else:
        assert isinstance(err, error), f"expected {error.__name__}, got {err!r}"
        assert err.source == str(path)
        if offset is not None:
            assert err.offset == offset
        assert str(path) in str(err) and f"offset {err.offset}" in str(err)
        expected_hist = index_hist(rec)
        if error in (IncompleteTailError, EncryptedBinlogError):
            assert dict(hist) == expected_hist  # every intact event before the damage came out
        else:
            assert all(n <= expected_hist.get(k, 0) for k, n in hist.items())
        if err.offset:
            assert all(e.offset < err.offset for e in events)
    # every event we yielded is intact and in file order: each starts where the last one ended
    outer = [e for e in events if e.inner_index is None]
    for a, b in zip(outer, outer[1:], strict=False):
        if b.offset != a.end_offset:
            assert a.type_name == "FORMAT_DESCRIPTION"  # only a start-position seek may jump
    # only event types nobody documents stay UnknownEvent, with their bytes
    for e in events:
        if isinstance(e.body, UnknownEvent):
            assert e.type_code not in (2, 4, 15, 16, 19, 30, 31, 32, 33, 34, 35)
            assert len(e.body.raw) == e.header.event_size - 19 - (4 if e.checksum is not None else 0)
    # and every decoded event has a JSON form
    for e in events:
        json.dumps(event_dict(e))


@pytest.mark.parametrize(
    "rec",
    [r for r in RECORDS if expected_outcome(r)[0] in (ChecksumMismatchError, NoFormatDescriptionError)],
    ids=lambda r: r["path"],
)
def test_lenient_read_of_doctored_or_fragment_files(corpus: Path, rec: dict[str, Any]) -> None:
    """Files with a doctored CRC decode whole without verification; fragments without a format
    event decode under the provisional v4 layout when asked to."""
    hist, _events, err = walk(corpus / rec["path"], verify_checksum=False, require_fde=False)
    assert err is None
    assert dict(hist) == index_hist(rec)


def test_checksum_error_names_expected_and_actual(corpus: Path) -> None:
    path = corpus / "mysql-server-8.0.39/std_data/binlog_recovery/duplicate_xid_ddl.000001"
    _hist, events, err = walk(path)
    assert isinstance(err, ChecksumMismatchError)
    assert err.offset == 507 and err.expected == 0x129BE4A8 and err.expected != err.actual
    assert [e.offset for e in events][-1] < 507  # everything before the damage was yielded


def test_start_and_stop_position(corpus: Path) -> None:
    path = corpus / "osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32"
    offsets = [e.offset for e in BinlogReader(path)]
    start, stop = offsets[10], offsets[20]
    got = [e.offset for e in BinlogReader(path, start_position=start, stop_position=stop)]
    assert got == [4] + offsets[10:20]
