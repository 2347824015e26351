"""``gcpace.paced``: the raised threshold holds while the pass runs and never leaks into the
caller's code."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from binlake.gcpace import paced


@pytest.fixture(autouse=True)
def threshold() -> Iterator[tuple[int, ...]]:
    old = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*old)


def seen(n: int, fail_at: int | None = None) -> Iterator[tuple[int, ...]]:
    """Yields the threshold in force while each of its items is made."""
    for i in range(n):
        if i == fail_at:
            raise ValueError("damaged")
        yield gc.get_threshold()


def test_the_pass_runs_paced_and_the_caller_keeps_its_threshold(threshold: tuple[int, ...]) -> None:
    got = []
    for inside in paced(seen(3), young=9_000):
        assert gc.get_threshold() == threshold  # the caller's code, between items
        got.append(inside)
    assert got == [(9_000, 10, 10)] * 3
    assert gc.get_threshold() == threshold


def test_an_error_of_the_pass_restores_the_threshold(threshold: tuple[int, ...]) -> None:
    it = paced(seen(3, fail_at=1), young=9_000)
    assert next(it) == (9_000, 10, 10)
    with pytest.raises(ValueError, match="damaged"):
        next(it)
    assert gc.get_threshold() == threshold


def test_never_more_often_and_never_switched_on() -> None:
    gc.set_threshold(100_000, 10, 10)
    assert list(paced(seen(1), young=9_000)) == [(100_000, 10, 10)]
    gc.set_threshold(0, 10, 10)  # automatic collection off: it stays off
    assert list(paced(seen(1), young=9_000)) == [(0, 10, 10)]
    assert gc.get_threshold() == (0, 10, 10)
