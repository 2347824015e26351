"""The snapshot journal keeps its plan exactly (key bounds with their types) and what is done."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.snapshot.chunks import KeyRange
from binlake.snapshot.journal import JournalError, SnapshotJournal

values = st.one_of(
    st.integers(-(2**64), 2**64), st.decimals(allow_nan=False, allow_infinity=False), st.text(), st.binary()
)
bounds = st.one_of(st.none(), st.tuples(values), st.tuples(values, values))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(bounds, bounds), min_size=1, max_size=5), st.text(min_size=1), st.text(min_size=1))
def test_a_saved_plan_loads_back_equal(
    tmp_path_factory: pytest.TempPathFactory, ranges: list, db: str, table: str
) -> None:
    path = tmp_path_factory.mktemp("j") / "_binlake_snapshot.json"
    plan = {(db, table): [KeyRange(lo, hi) for lo, hi in ranges], ("b`; --", "ü"): [KeyRange(None, None)]}
    j = SnapshotJournal(path, ("mariadb-bin.000007", 4), plan)
    j.save()
    j.mark_done([(db, table, 0)])
    back = SnapshotJournal.load(path)
    assert back is not None
    assert back.start == ("mariadb-bin.000007", 4)
    assert back.plan == plan
    for r, r2 in zip(plan[(db, table)], back.plan[(db, table)], strict=True):
        for b, b2 in ((r.low, r2.low), (r.high, r2.high)):
            assert [type(v) if not isinstance(v, int) else Decimal for v in b or ()] == [
                type(v) for v in b2 or ()
            ]
    assert back.done == {(db, table, 0)} and not back.complete
    back.mark_done(back.remaining)
    assert SnapshotJournal.load(path).complete  # type: ignore[union-attr]


def test_no_journal_and_a_foreign_file(tmp_path: Path) -> None:
    assert SnapshotJournal.load(tmp_path / "none.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 1, "tables": 3}')
    with pytest.raises(JournalError, match="not a snapshot journal binlake wrote"):
        SnapshotJournal.load(bad)
    bad.write_text('{"format": 99}')
    with pytest.raises(JournalError, match="format 99"):
        SnapshotJournal.load(bad)
