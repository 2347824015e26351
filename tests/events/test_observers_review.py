"""Review of dcccfb0 (decoder observers by event type): the compiled envelope's ``observers_of``
types ``state.observers`` as ``cdef list``, so observers held in any other sequence (a tuple, a
list subclass, a deque) make every decode raise ``TypeError: Expected list, got ...`` on the
compiled path, while the pure path (``DecodeState.observers_of``) hears them as before. Before
dcccfb0 both paths iterated ``state.observers`` and took any iterable alike."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from binlake.decoder import EventDecoder
from binlake.events.types import EventType
from binlake.generate import generate
from tests.events.test_fastenv import _frames
from tests.events.test_observers import PICKED, Picky, envelope  # noqa: F401,F811 (the fixture)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("observed"), target_bytes=30_000, max_file_size=None).files[0]


class Observers(list):  # a list by another name
    pass


@pytest.mark.parametrize(
    "holder",
    [tuple, Observers, collections.deque],
    ids=["tuple", "list-subclass", "deque"],
)
def test_observers_in_any_sequence_are_heard_on_both_paths(small: Path, envelope: bool, holder: Any) -> None:  # noqa: F811
    data = small.read_bytes()
    dec = EventDecoder(str(small))
    calls: list[tuple[str, int]] = []
    dec.state.observers = holder([lambda ev: calls.append(("every", ev.offset)), Picky(calls)])
    events = [ev for pos, size in _frames(data) for ev in dec.decode(data[pos : pos + size], pos)]
    expected: list[tuple[str, int]] = []
    for ev in events:
        if ev.kind == EventType.FORMAT_DESCRIPTION:  # not given to observers
            continue
        expected.append(("every", ev.offset))
        if ev.kind in PICKED:
            expected.append(("picky", ev.offset))
    assert calls == expected
